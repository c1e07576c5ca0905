//! `frontierd submit FILE`: the list posted in parts by [`frontierd_admin::client::Submission`];
//! here, the rejected lines printed as each part is answered, the progress line on a
//! terminal, the totals and the exit status.

use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::process::ExitCode;

use anyhow::{Context, Result};

use frontierd_admin::client::{PartAnswered, Submission, Target};
use frontierd_cli::text::Progress;

/// Exit status when some lines were rejected (0: every line accepted or already known;
/// 2: an error, see main.rs).
pub const EXIT_REJECTED: u8 = 1;

/// Count one part's answer and print its rejected lines, numbered in the whole file.
fn report_answer(
    stdout: &mut impl Write,
    progress: &mut Progress,
    part: PartAnswered,
) -> Result<()> {
    progress.count(
        part.lines(),
        part.answer.accepted,
        part.answer.duplicate,
        part.answer.rejections.len(),
    );
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
    let mut progress = Progress::new(std::io::stderr().is_terminal());
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
    writeln!(stdout, "{}", progress.totals().summary()).context("writing to stdout")?;
    Ok(if progress.totals().rejected > 0 {
        ExitCode::from(EXIT_REJECTED)
    } else {
        ExitCode::SUCCESS
    })
}
