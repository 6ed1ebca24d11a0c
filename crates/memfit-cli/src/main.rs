//! The `memfit` binary: [`memfit_cli::main_with_args`] on the process's arguments.

fn main() {
    std::process::exit(memfit_cli::main_with_args(std::env::args_os()));
}
