//! A signal that reaches the tracer thread after its loop looked for pending signals and
//! before it blocks in waitpid only sets a flag: with an idle program (asleep, blocked in a
//! read, hooked so that nothing stops) the wait would never end. A small thread watches the
//! flags while the loop runs and interrupts the wait (`signals::wake_tracer`) until the loop
//! has taken them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::ptrace::signals;

/// How long a signal may wait for the loop at most, about.
const LOOK_EVERY: Duration = Duration::from_millis(20);

/// Runs until dropped.
pub struct WakeWatch {
    running: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl WakeWatch {
    pub fn start() -> WakeWatch {
        let running = Arc::new(AtomicBool::new(true));
        let watching = Arc::clone(&running);
        let thread = std::thread::Builder::new()
            .name("memsup-wake".into())
            .spawn(move || {
                signals::block_in_this_thread();
                while watching.load(Ordering::SeqCst) {
                    if signals::work_pending() {
                        signals::wake_tracer();
                    }
                    std::thread::sleep(LOOK_EVERY);
                }
            })
            .ok();
        WakeWatch { running, thread }
    }
}

impl Drop for WakeWatch {
    fn drop(&mut self) {
        self.running.store(false, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
