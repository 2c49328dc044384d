//! A one-line progress display on stderr for long transfers (`send-file`, `download`): only
//! when stderr is a terminal and the transfer is big enough to take a while, so scripts and
//! tests that read oxictl's output never see it.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Below this a transfer is over before a progress line would tell anything.
const WORTH_SHOWING: u64 = 8 * 1024 * 1024;
/// Redrawing more often only costs the terminal.
const REDRAW: Duration = Duration::from_millis(200);

const MIB: f64 = 1024.0 * 1024.0;
/// The bar's width in characters.
const WIDTH: u64 = 30;

pub struct Progress {
    label: &'static str,
    total: u64,
    done: u64,
    started: Instant,
    drawn: Option<Instant>,
    shown: bool,
}

impl Progress {
    /// A transfer of `total` bytes; shows itself only on a terminal and for a big transfer.
    pub fn new(label: &'static str, total: u64) -> Self {
        Self {
            label,
            total,
            done: 0,
            started: Instant::now(),
            drawn: None,
            shown: total >= WORTH_SHOWING && std::io::stderr().is_terminal(),
        }
    }

    /// `n` more bytes went through.
    pub fn add(&mut self, n: u64) {
        self.done += n;
        if !self.shown {
            return;
        }
        let now = Instant::now();
        if self.drawn.is_some_and(|at| now - at < REDRAW) && self.done < self.total {
            return;
        }
        self.drawn = Some(now);
        self.draw();
    }

    fn draw(&self) {
        // Nothing to move is all done.
        let percent = (self.done * 100)
            .checked_div(self.total)
            .unwrap_or(100)
            .min(100);
        let filled = (percent * WIDTH / 100) as usize;
        let bar = format!(
            "{}{}",
            "#".repeat(filled),
            " ".repeat(WIDTH as usize - filled)
        );
        let line = format!(
            "\r{} [{bar}] {percent:>3}% {:.1}/{:.1} MiB {:.1} MiB/s",
            self.label,
            self.done as f64 / MIB,
            self.total as f64 / MIB,
            self.rate()
        );
        // A progress line that cannot be drawn is no reason to fail the transfer.
        let _ = std::io::stderr().write_all(line.as_bytes());
    }

    /// MiB/s since the start.
    pub fn rate(&self) -> f64 {
        let secs = self.started.elapsed().as_secs_f64();
        if secs > 0.0 {
            self.done as f64 / MIB / secs
        } else {
            0.0
        }
    }

    /// Ends the line, so what is printed next starts on a line of its own.
    pub fn finish(&self) {
        if self.shown && self.drawn.is_some() {
            self.draw();
            let _ = std::io::stderr().write_all(b"\n");
        }
    }
}
