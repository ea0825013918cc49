//! memsup's own failures: a panic on any of its threads is recorded (one line for the user)
//! and wakes the tracer thread, which detaches before memsup exits; and a test-only switch
//! that injects such failures.

use std::sync::{Mutex, OnceLock};

use crate::ptrace::signals;

/// A failure injected by the tests through `MEMSUP_TEST_FAULT` (test-only, read once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestFault {
    /// The tracer thread panics after handling its first stop while attached.
    TracerPanic,
    /// The writer thread panics on the first allocation record it receives.
    WriterPanic,
    /// The event loop returns an error after handling its first stop while attached.
    TracerError,
    /// Joining a process fails once its threads are seized and stopped, before anything is
    /// put into it.
    AttachError,
    /// Joining: the first process memsup seizes is killed between its seizure and its stop,
    /// as a process that ends while it is joined.
    JoinExit,
    /// `memsup snapshot` kills the process once its threads are stopped, and reaps them: a
    /// process that exits while the snapshot holds it.
    SnapshotExit,
    /// `memsup snapshot` holds the process stopped until memsup is killed.
    SnapshotHold,
}

/// The fault the tests asked for, if any.
pub fn test_fault() -> Option<TestFault> {
    static FAULT: OnceLock<Option<TestFault>> = OnceLock::new();
    *FAULT.get_or_init(|| match std::env::var("MEMSUP_TEST_FAULT").as_deref() {
        Ok("tracer-panic") => Some(TestFault::TracerPanic),
        Ok("writer-panic") => Some(TestFault::WriterPanic),
        Ok("tracer-error") => Some(TestFault::TracerError),
        Ok("attach-error") => Some(TestFault::AttachError),
        Ok("join-exit") => Some(TestFault::JoinExit),
        Ok("snapshot-exit") => Some(TestFault::SnapshotExit),
        Ok("snapshot-hold") => Some(TestFault::SnapshotHold),
        _ => None,
    })
}

/// The first panic's description, for the one-line error.
static FIRST_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// Replaces Rust's multi-line panic report: the panic is described once, by `main`, after
/// the tracer thread has detached; other threads' panics wake the tracer thread for that.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .map(|text| text.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into());
        let thread = std::thread::current();
        let location = info
            .location()
            .map(|at| format!(" at {}:{}", at.file(), at.line()))
            .unwrap_or_default();
        let description = format!(
            "the {} thread panicked{location}: {message}",
            thread.name().unwrap_or("unnamed")
        );
        if let Ok(mut first) = FIRST_PANIC.lock() {
            first.get_or_insert(description);
        }
        signals::report_failure();
    }));
}

/// The first panic's description, if a memsup thread panicked.
pub fn panic_description() -> Option<String> {
    FIRST_PANIC.lock().ok().and_then(|first| first.clone())
}

/// Locks `mutex` even when a panic elsewhere poisoned it: one failed thread must not stop
/// the rest from winding down and writing the profile.
pub fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
