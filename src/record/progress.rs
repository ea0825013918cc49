//! The live status line on a terminal: elapsed time, processes, events per second, live heap.
//! Nothing at all when stderr is not a terminal.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::interpret::LiveStats;

pub struct Progress {
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

pub fn human_bytes(bytes: i64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes.max(0) as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", units[unit])
    }
}

/// Where every bar of a recording is drawn: stderr on a terminal unless `quiet`, else nowhere.
pub fn bars(quiet: bool) -> MultiProgress {
    if quiet || !std::io::stderr().is_terminal() {
        MultiProgress::with_draw_target(ProgressDrawTarget::hidden())
    } else {
        MultiProgress::with_draw_target(ProgressDrawTarget::stderr())
    }
}

impl Progress {
    /// Starts the status line on `bars`, unless they are hidden.
    pub fn start(stats: Arc<LiveStats>, bars: &MultiProgress) -> Progress {
        let done = Arc::new(AtomicBool::new(false));
        if bars.is_hidden() {
            return Progress { done, thread: None };
        }
        let finished = done.clone();
        let bar = bars.add(ProgressBar::new_spinner());
        let thread = std::thread::spawn(move || {
            bar.set_style(
                ProgressStyle::with_template("memsup: {spinner} {elapsed} {msg}")
                    .expect("valid template"),
            );
            let started = Instant::now();
            let mut last_events = 0;
            let mut last_time = started;
            while !finished.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(250));
                let events = stats.events.load(Ordering::Relaxed);
                let now = Instant::now();
                let rate = (events - last_events) as f64
                    / now.duration_since(last_time).as_secs_f64().max(1e-3);
                (last_events, last_time) = (events, now);
                bar.set_message(format!(
                    "{} process(es), {events} events, {rate:.0} events/s, live heap {}",
                    stats.processes.load(Ordering::Relaxed),
                    human_bytes(stats.live_bytes.load(Ordering::Relaxed))
                ));
                bar.tick();
            }
            bar.finish_and_clear();
        });
        Progress {
            done,
            thread: Some(thread),
        }
    }

    pub fn stop(mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
