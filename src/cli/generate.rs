//! Files generated from the command line's own definition, so they never drift from it: shell completions
//! (`rein completions bash|zsh|fish`) and the man page (`rein man [--dir DIR]`), both written to standard output.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use clap::CommandFactory;

use super::{Cli, exit};

/// `rein completions SHELL`: the completion script for SHELL.
pub(super) fn completions(shell: clap_complete::Shell) -> ExitCode {
    let mut cli = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cli, "rein", &mut out);
    write_out(&out)
}

/// `rein man`: rein(1) in roff on standard output; with `dir`, rein.1 and one page per command (rein-run.1,
/// rein-config-set.1 …) written there, the layout `man` expects under `man1/`.
pub(super) fn man(dir: Option<&Path>) -> ExitCode {
    let cli = Cli::command();
    let mut out = Vec::new();
    let rendered = match dir {
        Some(dir) => clap_mangen::generate_to(cli, dir),
        None => clap_mangen::Man::new(cli).render(&mut out),
    };
    match rendered {
        Ok(()) => write_out(&out),
        Err(e) => {
            eprintln!("rein: cannot write the man page: {e}");
            ExitCode::from(exit::FAILED)
        }
    }
}

fn write_out(bytes: &[u8]) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rein: {e}");
            ExitCode::from(exit::FAILED)
        }
    }
}
