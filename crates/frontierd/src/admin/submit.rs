//! `frontierd submit FILE`: the list posted in parts by [`frontierd_admin::client::Submission`];
//! here, the rejected lines printed as each part is answered, the progress line on a
//! terminal, the totals and the exit status.

use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use frontierd_admin::client::{PartAnswered, Submission, Target};
use frontierd_cli::text::SubmitTotals;

/// Exit status when some lines were rejected (0: every line accepted or already known;
/// 2: an error, see main.rs).
pub const EXIT_REJECTED: u8 = 1;

/// Counts so far, and the progress line on a terminal.
struct Progress {
    on_terminal: bool,
    started: Instant,
    shown_at: Option<Instant>,
    totals: SubmitTotals,
}

impl Progress {
    fn line(&self) -> String {
        self.totals.progress(self.started.elapsed().as_secs_f64())
    }

    /// Redraw in place, at most 5 times a second.
    fn show(&mut self) {
        if !self.on_terminal
            || self
                .shown_at
                .is_some_and(|t| t.elapsed() < Duration::from_millis(200))
        {
            return;
        }
        eprint!("\r\x1b[K{}", self.line());
        self.shown_at = Some(Instant::now());
    }

    /// Clear the progress line (before other output).
    fn clear(&mut self) {
        if self.on_terminal && self.shown_at.is_some() {
            eprint!("\r\x1b[K");
            self.shown_at = None;
        }
    }

    fn finish(&mut self) {
        if self.on_terminal && self.shown_at.is_some() {
            eprintln!("\r\x1b[K{}", self.line());
        }
    }
}

/// Count one part's answer and print its rejected lines, numbered in the whole file.
fn report_answer(
    stdout: &mut impl Write,
    progress: &mut Progress,
    part: PartAnswered,
) -> Result<()> {
    let totals = &mut progress.totals;
    totals.lines += part.lines();
    totals.accepted += part.answer.accepted;
    totals.duplicate += part.answer.duplicate;
    totals.rejected += part.answer.rejections.len() as u64;
    if part.answer.rejections.is_empty() {
        return Ok(());
    }
    progress.clear();
    for r in part.answer.rejections {
        writeln!(stdout, "  line {}: {} ({})", r.line, r.url, r.reason)
            .context("writing to stdout")?;
    }
    Ok(())
}

pub async fn submit(t: Target, file: String) -> Result<ExitCode> {
    let input: Box<dyn BufRead + Send> = if file == "-" {
        Box::new(BufReader::new(std::io::stdin()))
    } else {
        let f = std::fs::File::open(&file).with_context(|| format!("opening {file}"))?;
        Box::new(BufReader::new(f))
    };
    let mut progress = Progress {
        on_terminal: std::io::stderr().is_terminal(),
        started: Instant::now(),
        shown_at: None,
        totals: SubmitTotals::default(),
    };
    let mut submission = Submission::start(t, input, file);
    let mut stdout = std::io::stdout().lock();
    loop {
        match submission.next().await {
            Ok(Some(part)) => {
                report_answer(&mut stdout, &mut progress, part)?;
                progress.show();
            }
            Ok(None) => break,
            Err(e) => {
                progress.clear();
                return Err(e.into());
            }
        }
    }
    progress.finish();
    writeln!(stdout, "{}", progress.totals.summary()).context("writing to stdout")?;
    Ok(if progress.totals.rejected > 0 {
        ExitCode::from(EXIT_REJECTED)
    } else {
        ExitCode::SUCCESS
    })
}
