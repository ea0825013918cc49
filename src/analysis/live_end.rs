//! What the blocks still live when an image's recording ended are: leaks when the program
//! ended while memsup watched it (an exit, a signal, an exec that replaced it); after a detach
//! they are blocks the program still uses, and after a recording cut short, blocks live then.

use super::{ImageExit, ProcessAnalysis};

/// The moment the live blocks of an image (`live_bytes_at_exit`) were counted at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveEnd {
    /// The process exited or was killed: what is live was never freed, a leak.
    Exit,
    /// memsup detached and the process ran on, its blocks in use.
    Detach,
    /// An exec replaced the program; its heap went with it, what was live never freed.
    Exec,
    /// The recording ended without seeing the process end.
    RecordingEnd,
}

impl LiveEnd {
    pub fn of(image: &ProcessAnalysis) -> Self {
        match image.exit {
            ImageExit::Code(_) | ImageExit::Signal(_) => LiveEnd::Exit,
            ImageExit::Detached => LiveEnd::Detach,
            ImageExit::Exec => LiveEnd::Exec,
            ImageExit::Unknown => LiveEnd::RecordingEnd,
        }
    }

    /// The JSON `live_at`.
    pub fn name(self) -> &'static str {
        match self {
            LiveEnd::Exit => "exit",
            LiveEnd::Detach => "detach",
            LiveEnd::Exec => "exec",
            LiveEnd::RecordingEnd => "recording_end",
        }
    }

    /// The text report's row label ("leaked at exit", "live at detach" ...).
    pub fn label(self) -> &'static str {
        match self {
            LiveEnd::Exit => "leaked at exit",
            LiveEnd::Detach => "live at detach",
            LiveEnd::Exec => "leaked at exec",
            LiveEnd::RecordingEnd => "live at end",
        }
    }

    /// What those bytes are, in a sentence: "1.2 KiB leaked in 3 blocks", "... live at
    /// detach in 3 blocks".
    pub fn words(self) -> &'static str {
        match self {
            LiveEnd::Exit | LiveEnd::Exec => "leaked",
            LiveEnd::Detach => "live at detach",
            LiveEnd::RecordingEnd => "live at end",
        }
    }

    /// The heading of a column of those bytes per site.
    pub fn column(self) -> &'static str {
        match self {
            LiveEnd::Exit | LiveEnd::Exec => "leaked",
            LiveEnd::Detach => "at detach",
            LiveEnd::RecordingEnd => "at end",
        }
    }
}

/// What a count of leaks leaves out: a process memsup attached to, or one forked from it,
/// had blocks before memsup saw any call; those that were never freed are not counted.
pub fn leak_caveat(image: &ProcessAnalysis) -> Option<&'static str> {
    match (LiveEnd::of(image), image.joined_running) {
        (LiveEnd::Exit, true) => Some("blocks allocated before the attach are not known"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::format::StartCause;

    fn image(cause: StartCause, exit: ImageExit) -> ProcessAnalysis {
        let mut image = ProcessAnalysis::new(7, None, cause, 0);
        image.exit = exit;
        image
    }

    #[test]
    fn only_an_exit_leaks() {
        let cases = [
            (ImageExit::Code(0), "leaked at exit", "exit"),
            (ImageExit::Signal(9), "leaked at exit", "exit"),
            (ImageExit::Detached, "live at detach", "detach"),
            (ImageExit::Exec, "leaked at exec", "exec"),
            (ImageExit::Unknown, "live at end", "recording_end"),
        ];
        for (exit, label, name) in cases {
            let end = LiveEnd::of(&image(StartCause::Attach, exit));
            assert_eq!((end.label(), end.name()), (label, name), "{exit:?}");
        }
    }

    #[test]
    fn an_attached_process_that_exits_leaks_what_was_seen() {
        let attached = image(StartCause::Attach, ImageExit::Code(0));
        let caveat = Some("blocks allocated before the attach are not known");
        assert_eq!(leak_caveat(&attached), caveat);
        assert_eq!(
            leak_caveat(&image(StartCause::Launch, ImageExit::Code(0))),
            None
        );
        assert_eq!(
            leak_caveat(&image(StartCause::Attach, ImageExit::Detached)),
            None
        );
    }
}
