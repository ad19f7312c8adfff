//! A register as a cluster-wide mode switch: readers wake only on a newer write.
//!
//! `cargo run --example register`

use std::time::Duration;

use stampede::{ContainerOptions, GetError, Runtime, StmError};

fn main() -> Result<(), StmError> {
    let rt = Runtime::new();
    let mode = rt.register(ContainerOptions::default().name("kiosk/mode"))?;

    let watcher = rt.spawn(0, {
        let mode = mode.clone();
        move |task| -> Result<Vec<String>, StmError> {
            let input = task.attach_input(&mode)?;
            let mut seen = Vec::new();
            loop {
                match input.read_timeout(Duration::from_secs(2)) {
                    Ok((seq, v)) => {
                        let v = v.as_str().unwrap_or("?").to_owned();
                        println!("write #{seq}: {v}");
                        let done = v == "shutdown";
                        seen.push(v);
                        if done {
                            return Ok(seen);
                        }
                    }
                    Err(GetError::Timeout(_)) => return Ok(seen),
                    Err(_) => return Err(StmError::Closed),
                }
            }
        }
    })?;

    let controller = rt.task(0)?;
    let out = controller.attach_output(&mode)?;
    for m in ["idle", "greeting", "tracking", "shutdown"] {
        out.write(m)?;
        std::thread::sleep(Duration::from_millis(20));
    }
    let seen = watcher.join().expect("watcher")?;
    println!("the watcher saw {} of 4 writes", seen.len());
    Ok(())
}
