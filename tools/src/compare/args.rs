//! `bench-compare`'s command line: the flags ([`USAGE`]), what they ask for
//! ([`Args`], with its defaults) and [`parse_args`], which reads them with the
//! crate's shared parser ([`crate::cli`]).

use crate::cli::{ArgError, invalid, pairs};

/// The usage text of `bench-compare --help`.
pub const USAGE: &str = "\
bench-compare: run the criterion benchmarks of two git revisions alternately and compare them

usage: cargo run -p spindle-tools --release --bin bench-compare -- [options]

options:
  --base REV      the baseline revision (default: `git merge-base HEAD main`, or HEAD)
  --head REV      the revision under test (default: the working tree, uncommitted changes included)
  --bench NAME    the bench target of crate `benches` (default: suite)
  --filter REGEX  criterion's filter: only benchmarks whose id matches
  --rounds N      how many times each side runs, alternating (default: 3)
  --quick         export SPINDLE_BENCH_QUICK=1 to the benchmarks
  --from-runs     build and run nothing: print the last comparison's tables again
  -h, --help      print this text

Tables go to stdout; progress and the benchmarks' own output to stderr.
Worktrees, builds and criterion's results live under target/bench-compare/.";

/// The bench target compared when `--bench` is not given.
pub const DEFAULT_BENCH: &str = "suite";

/// The rounds run when `--rounds` is not given.
pub const DEFAULT_ROUNDS: u32 = 3;

/// What `bench-compare` was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    /// `--base`: `None` means `git merge-base HEAD main` (or HEAD).
    pub base: Option<String>,
    /// `--head`: `None` means the working tree.
    pub head: Option<String>,
    /// `--bench`: the bench target's name.
    pub bench: String,
    /// `--filter`: criterion's positional filter (a regex).
    pub filter: Option<String>,
    /// `--rounds`: at least one.
    pub rounds: u32,
    /// `--quick`: export `SPINDLE_BENCH_QUICK=1`.
    pub quick: bool,
    /// `--from-runs`: build and run nothing; print the tables of the last
    /// comparison's results again (with today's statistics).
    pub from_runs: bool,
}

impl Default for Args {
    fn default() -> Self {
        Args {
            base: None,
            head: None,
            bench: DEFAULT_BENCH.to_owned(),
            filter: None,
            rounds: DEFAULT_ROUNDS,
            quick: false,
            from_runs: false,
        }
    }
}

/// Parses the arguments after the program name: `--flag value` or
/// `--flag=value`; a repeated flag keeps its last value.
pub fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Args, ArgError> {
    let with_values = ["--base", "--head", "--bench", "--filter", "--rounds"];
    let mut out = Args::default();
    for (flag, value) in pairs(args, &with_values, &["--quick", "--from-runs"])? {
        let Some(value) = value else {
            match flag {
                "--quick" => out.quick = true,
                _ => out.from_runs = true,
            }
            continue;
        };
        if value.is_empty() {
            return Err(invalid(flag, &value, "must not be empty"));
        }
        match flag {
            "--base" => out.base = Some(value),
            "--head" => out.head = Some(value),
            "--bench" => out.bench = value,
            "--filter" => out.filter = Some(value),
            _ => {
                out.rounds = match value.trim().parse::<u32>() {
                    Ok(n) if n >= 1 => n,
                    Ok(_) => return Err(invalid(flag, &value, "at least one round is needed")),
                    Err(_) => return Err(invalid(flag, &value, "expected a whole number")),
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn without_arguments_the_defaults_apply() {
        let args = parse_args(Vec::new()).expect("parses");
        assert_eq!(args, Args::default());
        assert_eq!(args.base, None);
        assert_eq!(args.head, None);
        assert_eq!(args.bench, "suite");
        assert_eq!(args.rounds, 3);
        assert!(!args.quick);
    }

    #[test]
    fn every_flag_is_read_in_both_forms() {
        let args = parse_args(strings(&[
            "--base",
            "HEAD~1",
            "--head=feature",
            "--bench",
            "bind",
            "--filter=ShallowBind\\.(pure|delay)",
            "--rounds",
            "5",
            "--quick",
            "--from-runs",
        ]))
        .expect("parses");
        assert_eq!(
            args,
            Args {
                base: Some("HEAD~1".to_owned()),
                head: Some("feature".to_owned()),
                bench: "bind".to_owned(),
                filter: Some("ShallowBind\\.(pure|delay)".to_owned()),
                rounds: 5,
                quick: true,
                from_runs: true,
            }
        );
    }

    #[test]
    fn an_unknown_flag_is_an_error_naming_it() {
        let e = parse_args(strings(&["--rounds", "2", "--fast"])).unwrap_err();
        assert_eq!(e, ArgError::Unknown("--fast".to_owned()));
        assert!(e.to_string().contains("--fast"));
        let e = parse_args(strings(&["stray"])).unwrap_err();
        assert!(e.to_string().contains("stray"));
    }

    #[test]
    fn bad_values_are_errors_naming_the_flag() {
        assert_eq!(
            parse_args(strings(&["--rounds"])).unwrap_err(),
            ArgError::MissingValue("--rounds")
        );
        for bad in ["0", "two", "-1"] {
            let e = parse_args(strings(&["--rounds", bad])).unwrap_err();
            assert!(e.to_string().contains("--rounds"), "{e}");
        }
        assert!(
            parse_args(strings(&["--base="]))
                .unwrap_err()
                .to_string()
                .contains("--base")
        );
        assert_eq!(parse_args(strings(&["-h"])).unwrap_err(), ArgError::Help);
    }
}
