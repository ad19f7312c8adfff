//! Time zones: two unrelated streams whose timestamps mean different things collect their
//! garbage independently, so a slow stream never holds back the other.
//!
//! `cargo run --example zones`

use stampede::{ContainerOptions, Runtime, StmError, ZoneId, INFINITY};

fn main() -> Result<(), StmError> {
    let rt = Runtime::builder().gc_interval(None).build();
    let audio_zone = ZoneId(1);
    let video = rt.channel(ContainerOptions::default().name("video"))?;
    let audio = rt.channel(ContainerOptions::default().name("audio").zone(audio_zone))?;

    let camera = rt.task_builder().name("camera").virtual_time(0).create()?;
    let mic = rt
        .task_builder()
        .name("mic")
        .zone(audio_zone)
        .virtual_time(0)
        .create()?;
    let (v, a) = (camera.attach_output(&video)?, mic.attach_output(&audio)?);
    for ts in 0..30 {
        v.put(ts, "frame").map_err(|_| StmError::Closed)?;
    }
    for ts in 0..48_000 {
        a.put(ts, "sample").map_err(|_| StmError::Closed)?;
        if ts % 16_000 == 15_999 {
            mic.set_virtual_time(ts + 1)?;
        }
    }
    camera.set_virtual_time(INFINITY)?; // the camera is done; the mic is not
    println!("video zone floor: {}", rt.collect_zone(ZoneId::DEFAULT));
    println!("audio zone floor: {}", rt.collect_zone(audio_zone));
    println!(
        "video items left: {}, audio items left: {}",
        video.len(),
        audio.len()
    );
    println!("{}", rt.explain(audio_zone));
    // A task may not put into another zone's container.
    println!(
        "camera -> audio: {:?}",
        camera.attach_output(&audio).unwrap_err()
    );
    Ok(())
}
