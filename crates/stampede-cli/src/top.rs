//! `stampede top`: a live terminal view of an application's address spaces, zones,
//! containers and tasks, from every space's metrics (`Space::application_metrics`).

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table};
use ratatui::Frame;
use stampede_observe::Sample;

use crate::args::TopArgs;
use crate::Failure;

/// How the containers are ordered; `s` cycles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sort {
    Name,
    PutRate,
    Items,
}

impl Sort {
    fn next(self) -> Sort {
        match self {
            Sort::Name => Sort::PutRate,
            Sort::PutRate => Sort::Items,
            Sort::Items => Sort::Name,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Sort::Name => "name",
            Sort::PutRate => "puts/s",
            Sort::Items => "items",
        }
    }
}

/// A sample's identity: its family and labels.
type Key = (String, Vec<(String, String)>);

fn key(s: &Sample) -> Key {
    let mut labels: Vec<(String, String)> = s
        .labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    labels.sort();
    (s.name.to_string(), labels)
}

fn label<'a>(s: &'a Sample, name: &str) -> &'a str {
    s.labels
        .iter()
        .find(|(k, _)| k == name)
        .map_or("", |(_, v)| v.as_str())
}

/// One refresh: the samples and, for counters, their rates since the last one.
struct View {
    samples: Vec<Sample>,
    rates: HashMap<Key, f64>,
}

impl View {
    fn new(samples: Vec<Sample>, last: Option<&(Instant, HashMap<Key, f64>)>) -> View {
        let mut rates = HashMap::new();
        if let Some((at, before)) = last {
            let dt = at.elapsed().as_secs_f64().max(1e-3);
            for s in &samples {
                let k = key(s);
                if let Some(b) = before.get(&k) {
                    rates.insert(k, ((s.value - b) / dt).max(0.0));
                }
            }
        }
        View { samples, rates }
    }

    fn of<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| s.name == name)
    }

    /// The value of family `name` with exactly these labels' values among its labels.
    fn value(&self, name: &str, with: &[(&str, &str)]) -> Option<f64> {
        self.of(name)
            .find(|s| with.iter().all(|(k, v)| label(s, k) == *v))
            .map(|s| s.value)
    }

    fn rate(&self, name: &str, with: &[(&str, &str)]) -> Option<f64> {
        self.of(name)
            .find(|s| with.iter().all(|(k, v)| label(s, k) == *v))
            .and_then(|s| self.rates.get(&key(s)).copied())
    }
}

fn short(space: &str) -> &str {
    &space[..space.len().min(8)]
}

fn num(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_infinite() => "INF".into(),
        Some(v) if v.fract() == 0.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
        None => "-".into(),
    }
}

/// The rows of each table, as text, filtered and sorted.
struct Tables {
    spaces: Vec<Vec<String>>,
    zones: Vec<Vec<String>>,
    containers: Vec<Vec<String>>,
    tasks: Vec<Vec<String>>,
}

fn tables(v: &View, sort: Sort, filter: &str) -> Tables {
    let keep = |texts: &[&str]| filter.is_empty() || texts.iter().any(|t| t.contains(filter));
    let mut spaces = Vec::new();
    for up in v.of("stampede_space_up") {
        let sp = label(up, "space");
        let w = [("space", sp)];
        spaces.push(vec![
            short(sp).to_owned(),
            if up.value > 0.0 { "up" } else { "DOWN" }.to_owned(),
            num(v.rate("stampede_space_served", &w)),
            num(v.rate("stampede_space_pushed", &w)),
            num(v.value("stampede_space_unreachable", &w)),
            num(v
                .value("stampede_process_resident_bytes", &w)
                .map(|b| (b / 1e6).round())),
        ]);
    }
    let mut zones = Vec::new();
    for wm in v.of("stampede_zone_watermark") {
        let (sp, z) = (label(wm, "space"), label(wm, "zone"));
        let holders: Vec<String> = v
            .of("stampede_zone_watermark_holder")
            .filter(|h| label(h, "space") == sp && label(h, "zone") == z)
            .map(|h| format!("{} {}", label(h, "cause"), label(h, "name")))
            .collect();
        zones.push(vec![
            short(sp).to_owned(),
            z.to_owned(),
            num(v.value("stampede_zone_floor", &[("space", sp), ("zone", z)])),
            num(Some(wm.value)),
            holders.join(", "),
        ]);
    }
    let mut rows: Vec<(String, f64, f64, Vec<String>)> = Vec::new();
    for items in v.of("stampede_container_items") {
        let (sp, c, k) = (
            label(items, "space"),
            label(items, "container"),
            label(items, "kind"),
        );
        if !keep(&[c, sp]) {
            continue;
        }
        let w = [("space", sp), ("container", c), ("kind", k)];
        let puts = v.rate("stampede_container_puts", &w);
        rows.push((
            format!("{c} {sp}"),
            puts.unwrap_or(0.0),
            items.value,
            vec![
                c.to_owned(),
                k.to_owned(),
                short(sp).to_owned(),
                num(Some(items.value)),
                num(puts),
                num(v.rate("stampede_container_gets", &w)),
                num(v.value("stampede_container_skipped", &w)),
                num(v.value("stampede_container_full", &w)),
                num(v.value("stampede_container_reclaimed", &w)),
            ],
        ));
    }
    match sort {
        Sort::Name => rows.sort_by(|a, b| a.0.cmp(&b.0)),
        Sort::PutRate => rows.sort_by(|a, b| b.1.total_cmp(&a.1)),
        Sort::Items => rows.sort_by(|a, b| b.2.total_cmp(&a.2)),
    }
    let mut tasks: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for t in v.of("stampede_task_virtual_time") {
        let (sp, name) = (label(t, "space"), label(t, "task"));
        if keep(&[name, sp]) {
            tasks.insert(
                format!("{name} {sp} {}", label(t, "zone")),
                vec![
                    name.to_owned(),
                    short(sp).to_owned(),
                    label(t, "zone").to_owned(),
                    num(Some(t.value)),
                ],
            );
        }
    }
    Tables {
        spaces,
        zones,
        containers: rows.into_iter().map(|r| r.3).collect(),
        tasks: tasks.into_values().collect(),
    }
}

fn table<'a>(
    title: &'a str,
    header: &'a [&'a str],
    rows: &'a [Vec<String>],
    widths: &'a [u16],
) -> Table<'a> {
    let bold = Style::default().add_modifier(Modifier::BOLD);
    Table::new(
        rows.iter().map(|r| Row::new(r.iter().map(String::as_str))),
        widths.iter().map(|w| Constraint::Min(*w)),
    )
    .header(Row::new(header.iter().copied()).style(bold))
    .block(Block::default().borders(Borders::ALL).title(title))
}

struct Screen<'a> {
    app: &'a str,
    tables: &'a Tables,
    sort: Sort,
    filter: &'a str,
    editing: bool,
}

fn draw(f: &mut Frame<'_>, s: &Screen<'_>) {
    let t = s.tables;
    let [head, spaces, zones, containers, tasks, keys] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(t.spaces.len() as u16 + 3),
        Constraint::Length(t.zones.len() as u16 + 3),
        Constraint::Min(4),
        Constraint::Min(4),
        Constraint::Length(1),
    ])
    .areas(f.area());
    let status = format!(
        "stampede top: {} | {} address spaces | sort: {} | filter: {}{}",
        s.app,
        t.spaces.len(),
        s.sort.label(),
        s.filter,
        if s.editing { "_" } else { "" }
    );
    f.render_widget(Paragraph::new(status), head);
    f.render_widget(
        table(
            "address spaces",
            &[
                "space",
                "state",
                "served/s",
                "pushed/s",
                "unreachable",
                "RSS MB",
            ],
            &t.spaces,
            &[8, 5, 9, 9, 11, 7],
        ),
        spaces,
    );
    f.render_widget(
        table(
            "zones",
            &["space", "zone", "floor", "watermark", "held by"],
            &t.zones,
            &[8, 4, 8, 9, 30],
        ),
        zones,
    );
    f.render_widget(
        table(
            "containers",
            &[
                "container",
                "kind",
                "space",
                "items",
                "puts/s",
                "gets/s",
                "skipped",
                "full",
                "reclaimed",
            ],
            &t.containers,
            &[12, 7, 8, 6, 7, 7, 7, 5, 9],
        ),
        containers,
    );
    f.render_widget(
        table(
            "tasks",
            &["task", "space", "zone", "virtual time"],
            &t.tasks,
            &[16, 8, 4, 12],
        ),
        tasks,
    );
    f.render_widget(
        Paragraph::new("q quit  s sort  / filter (Enter ends, Esc clears)"),
        keys,
    );
}

/// Restores the terminal however the view ends.
struct Terminal(ratatui::DefaultTerminal);

impl Drop for Terminal {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// Shows the application until `q`, refreshing every `--interval`.
pub(crate) fn top(a: TopArgs) -> Result<(), Failure> {
    let space = a.observer.join()?;
    let failed = |e: io::Error| Failure::runtime(format!("the terminal: {e}"));
    let mut term = Terminal(ratatui::try_init().map_err(failed)?);
    let me = space.id().to_owned();
    let (mut sort, mut filter, mut editing) = (Sort::Name, String::new(), false);
    let mut last: Option<(Instant, HashMap<Key, f64>)> = None;
    let mut view = View::new(Vec::new(), None);
    let mut next = Instant::now();
    loop {
        if Instant::now() >= next {
            let samples: Vec<Sample> = space
                .application_metrics(a.observer.conn.timeout)
                .into_iter()
                .filter(|s| label(s, "space") != me)
                .collect();
            view = View::new(samples, last.as_ref());
            last = Some((
                Instant::now(),
                view.samples.iter().map(|s| (key(s), s.value)).collect(),
            ));
            next = Instant::now() + a.interval;
        }
        let t = tables(&view, sort, &filter);
        term.0
            .draw(|f| {
                draw(
                    f,
                    &Screen {
                        app: &a.observer.conn.app,
                        tables: &t,
                        sort,
                        filter: &filter,
                        editing,
                    },
                )
            })
            .map_err(failed)?;
        let wait = next
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(200));
        if event::poll(wait).map_err(failed)? {
            if let Event::Key(k) = event::read().map_err(failed)? {
                if k.kind != KeyEventKind::Press {
                    continue;
                }
                match (editing, k.code) {
                    (true, KeyCode::Enter) => editing = false,
                    (true, KeyCode::Esc) => {
                        editing = false;
                        filter.clear();
                    }
                    (true, KeyCode::Backspace) => {
                        filter.pop();
                    }
                    (true, KeyCode::Char(c)) => filter.push(c),
                    (false, KeyCode::Char('q')) | (false, KeyCode::Esc) => break,
                    (false, KeyCode::Char('s')) => sort = sort.next(),
                    (false, KeyCode::Char('/')) => {
                        editing = true;
                        filter.clear();
                    }
                    _ => {}
                }
            }
        }
    }
    drop(term);
    space.leave();
    Ok(())
}
