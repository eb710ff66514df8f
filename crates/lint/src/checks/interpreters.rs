//! Where a program that runs code takes it from, as its arguments say: an argument (`sh -c CODE`,
//! `python -c CODE`, every argument of `eval`), a script file (`bash FILE`, `source FILE`,
//! `php -f FILE`) or stdin (`sh`, `sh -s`, `python3 -`, `iex` with no arguments). Each program
//! family's options are a [`Spec`]: which options run an argument, name a script, take a value or
//! read stdin, and whether short options combine (`-ec`). Read by
//! [`download`](super::download) to tell `curl … | sh` (code from stdin) from `curl … | sh -c
//! 'cat > f'` (data on stdin).

use super::shell_syntax::Word;

/// Shells (their `-c` runs an argument, `-s` reads stdin).
pub(super) const SHELLS: &[&str] =
    &["sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "yash"];

/// Where a code-running program takes its code from, as far as the arguments say.
#[derive(Default)]
pub(super) struct Inputs<'w> {
    /// Arguments that hold code (`-c CODE`, every argument of `eval`); with a flag, everything
    /// from the flag on.
    pub code: Vec<&'w Word>,
    /// The script file it runs.
    pub script: Option<&'w Word>,
    /// It reads its code from stdin.
    pub stdin: bool,
}

/// How a program's options say where its code comes from.
struct Spec {
    /// Options after which the program runs an argument (`-c`, `-e`, `-m`), not stdin.
    code: &'static [&'static str],
    /// Options whose value is the script file.
    script: &'static [&'static str],
    /// Options that take the next word as their value.
    value: &'static [&'static str],
    /// Options that make it read code from stdin.
    stdin: &'static [&'static str],
    /// Whether short options combine (`-ec`): then each of the lists above is read letter by
    /// letter too.
    clusters: bool,
    /// Whether `+o` is an option (shells).
    plus: bool,
    /// Whether options are case-insensitive (PowerShell).
    ignore_case: bool,
}

const SHELL: Spec = Spec {
    code: &["-c"],
    script: &[],
    value: &["-o", "+o", "-O", "+O", "--rcfile", "--init-file"],
    stdin: &["-s"],
    clusters: true,
    plus: true,
    ignore_case: false,
};
const PYTHON: Spec = Spec {
    code: &["-c", "-m"],
    script: &[],
    value: &["-W", "-X", "--check-hash-based-pycs"],
    stdin: &[],
    clusters: true,
    plus: false,
    ignore_case: false,
};
const PERL: Spec = Spec {
    code: &["-e", "-E"],
    script: &[],
    value: &[],
    stdin: &[],
    clusters: true,
    plus: false,
    ignore_case: false,
};
const RUBY: Spec = Spec {
    code: &["-e"],
    script: &[],
    value: &["-r", "-I", "-C"],
    stdin: &[],
    clusters: true,
    plus: false,
    ignore_case: false,
};
const NODE: Spec = Spec {
    code: &["-e", "--eval", "-p", "--print", "-pe"],
    script: &[],
    value: &["-r", "--require", "--import", "--loader", "--input-type"],
    stdin: &[],
    clusters: false,
    plus: false,
    ignore_case: false,
};
const PHP: Spec = Spec {
    code: &["-r", "-B", "-R", "-E"],
    script: &["-f"],
    value: &["-d", "-c", "-z"],
    stdin: &[],
    clusters: false,
    plus: false,
    ignore_case: false,
};
const LUA: Spec = Spec {
    code: &["-e"],
    script: &[],
    value: &["-l"],
    stdin: &[],
    clusters: false,
    plus: false,
    ignore_case: false,
};
const POWERSHELL: Spec = Spec {
    code: &["-c", "-command", "-e", "-ec", "-encodedcommand"],
    script: &["-f", "-file"],
    value: &["-ep", "-ex", "-executionpolicy", "-wd", "-workingdirectory", "-o", "-outputformat"],
    stdin: &[],
    clusters: false,
    plus: false,
    ignore_case: true,
};

/// What one option word is.
enum Opt {
    Code,
    Script,
    /// Takes the next word as its value.
    Value,
    Stdin,
    Other,
}

impl Spec {
    fn classify(&self, word: &str) -> Opt {
        let lower = word.to_ascii_lowercase();
        let word = if self.ignore_case { lower.as_str() } else { word };
        if self.code.contains(&word) {
            return Opt::Code;
        }
        if self.script.contains(&word) {
            return Opt::Script;
        }
        if self.value.contains(&word) {
            return Opt::Value;
        }
        if self.stdin.contains(&word) {
            return Opt::Stdin;
        }
        if self.clusters && !word.starts_with("--") {
            return self.classify_cluster(word);
        }
        Opt::Other
    }

    /// `-ec`, `-lc`, `-uc`, `-ne`: the first letter that means something decides.
    fn classify_cluster(&self, word: &str) -> Opt {
        let Some(letters) = word.get(1..) else { return Opt::Other };
        let has = |list: &[&str], letter: char| {
            list.iter().any(|o| o.len() == 2 && o.ends_with(letter) && o.starts_with('-'))
        };
        let mut stdin = false;
        for (k, letter) in letters.char_indices() {
            if has(self.code, letter) {
                return Opt::Code;
            }
            if has(self.stdin, letter) {
                stdin = true;
            } else if has(self.value, letter) {
                // The value is the rest of the word, or the next word when this letter is last.
                return if k + letter.len_utf8() == letters.len() {
                    Opt::Value
                } else {
                    Opt::Other
                };
            }
        }
        if stdin { Opt::Stdin } else { Opt::Other }
    }

    fn is_option(&self, word: &str) -> bool {
        word.len() > 1 && (word.starts_with('-') || (self.plus && word.starts_with('+')))
    }
}

impl<'w> Inputs<'w> {
    /// Where `name` takes its code from, when it is a program that runs code.
    pub(super) fn of(name: &str, args: &'w [Word]) -> Option<Self> {
        let spec = match name {
            "eval" => return Some(Self { code: args.iter().collect(), ..Self::default() }),
            "iex" | "invoke-expression" => {
                let code: Vec<&Word> = args.iter().collect();
                return Some(Self { stdin: code.is_empty(), code, ..Self::default() });
            }
            "source" | "." => {
                let script = args.first();
                let stdin = script.is_some_and(|w| is_stdin(&w.text));
                return Some(Self { script: script.filter(|_| !stdin), stdin, ..Self::default() });
            }
            _ if SHELLS.contains(&name) => &SHELL,
            _ if name.starts_with("python") || name.starts_with("pypy") => &PYTHON,
            "perl" => &PERL,
            "ruby" => &RUBY,
            "node" | "nodejs" => &NODE,
            "php" => &PHP,
            "lua" | "luajit" => &LUA,
            "pwsh" | "powershell" => &POWERSHELL,
            _ => return None,
        };
        Some(Self::from_options(spec, args))
    }

    fn from_options(spec: &Spec, args: &'w [Word]) -> Self {
        let mut stdin_flag = false;
        let mut k = 0;
        while let Some(word) = args.get(k) {
            let text = word.text.as_str();
            if text == "--" {
                k += 1;
                break;
            }
            if !spec.is_option(text) {
                break;
            }
            match spec.classify(text) {
                Opt::Code => {
                    let code: Vec<&Word> = args.get(k..).unwrap_or_default().iter().collect();
                    // `pwsh -c -` reads the command from stdin.
                    let stdin = args.get(k + 1).is_some_and(|w| w.text == "-");
                    return Self { code, stdin, ..Self::default() };
                }
                Opt::Script => return Self { script: args.get(k + 1), ..Self::default() },
                Opt::Value => k += 1,
                Opt::Stdin => stdin_flag = true,
                Opt::Other => {}
            }
            k += 1;
        }
        match args.get(k) {
            _ if stdin_flag => Self { stdin: true, ..Self::default() },
            None => Self { stdin: true, ..Self::default() },
            Some(w) if is_stdin(&w.text) => Self { stdin: true, ..Self::default() },
            Some(w) => Self { script: Some(w), ..Self::default() },
        }
    }
}

pub(super) fn is_stdin(path: &str) -> bool {
    matches!(path, "-" | "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0")
}
