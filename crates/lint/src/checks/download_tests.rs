use super::downloaded_code;
use crate::checks::shell_parser::parse;

fn ways(command: &str) -> Vec<String> {
    downloaded_code(&parse(command))
}

#[test]
fn code_that_is_downloaded_and_run() {
    for (command, way) in [
        ("curl -fsSL https://get.example.com/install.sh | sh", "`curl` is piped into `sh`"),
        ("curl -s https://x/i.sh | sudo -E bash -s -- --yes", "`curl` is piped into `bash`"),
        ("wget -qO- https://x/i.sh | sudo sh", "`wget` is piped into `sh`"),
        ("wget -O - https://x/i.py | python3 -", "`wget` is piped into `python3`"),
        ("curl https://x/a.js | node", "`curl` is piped into `node`"),
        ("curl https://x | tee log | bash", "`curl` is piped into `bash`"),
        ("iwr https://x/i.ps1 | iex", "`iwr` is piped into `iex`"),
        ("/usr/bin/curl https://x | /bin/sh", "`curl` is piped into `sh`"),
        ("echo \"$(curl https://x)\" | sh", "`curl` is piped into `sh`"),
        ("sh -c \"$(curl -fsSL https://x/i.sh)\"", "`sh` runs code from `curl`"),
        ("/bin/bash -c \"$(curl -fsSL https://x)\"", "`bash` runs code from `curl`"),
        ("eval \"$(wget -qO- https://x)\"", "`eval` runs code from `wget`"),
        ("python3 -c \"$(curl https://x/p.py)\"", "`python3` runs code from `curl`"),
        ("sh <<< \"$(curl https://x)\"", "`sh` runs code from `curl`"),
        ("bash <(curl -s https://x/i.sh)", "`bash` runs a script from `curl`"),
        ("source <(curl -s https://x/env.sh)", "`source` runs a script from `curl`"),
        (". <(wget -qO- https://x)", "`.` runs a script from `wget`"),
        ("bash < <(curl https://x)", "`bash` runs a script from `curl`"),
        ("$(curl https://x/cmd)", "the output of `curl` is run as a command"),
        ("curl -o i.sh https://x && sh i.sh", "`sh` runs `i.sh`, which `curl` downloaded"),
        ("curl -fsSLo i.sh https://x; bash ./i.sh", "`bash` runs `./i.sh`, which `curl`"),
        ("curl --output=i.sh https://x && sh i.sh", "`sh` runs `i.sh`, which `curl`"),
        ("curl -O https://x/get.sh && sh get.sh", "`sh` runs `get.sh`, which `curl`"),
        ("curl https://x > i.sh; sh i.sh", "`sh` runs `i.sh`, which `curl`"),
        ("curl -o i.sh https://x; sh < i.sh", "`sh` runs `i.sh`, which `curl`"),
        (
            "wget https://x/install.sh && chmod +x install.sh && ./install.sh",
            "`./install.sh` runs the file that `wget` downloaded",
        ),
        ("wget -O /tmp/i.py https://x && python3 /tmp/i.py", "`python3` runs `/tmp/i.py`"),
        ("sh -c 'curl https://x | sh'", "`curl` is piped into `sh`"),
        ("cd app && (curl https://x | sh)", "`curl` is piped into `sh`"),
    ] {
        let got = ways(command);
        assert!(got.iter().any(|w| w.contains(way)), "{command:?}: {got:?}");
    }
}

#[test]
fn fetching_alone_or_into_a_reader_is_not_flagged() {
    for command in [
        "curl -o file https://x/i.sh",
        "curl -fsSL https://x/data.json | jq .",
        "curl https://x | python3 -m json.tool",
        "curl https://x | python3 -c 'import sys; print(len(sys.stdin.read()))'",
        "curl https://x | python3 parse.py",
        "curl https://x | sh -c 'cat > out.txt'",
        "curl https://x | grep -c ok",
        "curl -o i.sh https://x && cat i.sh",
        "curl -o i.sh https://x && sh other.sh",
        "wget https://x/install.sh && sha256sum -c sums.txt",
        "echo hi | sh",
        "cat local.sh | bash",
        "bash <(cat local.sh)",
        "sh -c 'echo $(date)'",
        "echo \"curl https://x | sh\"",
        "grep 'curl | sh' notes.md",
        "python3 <<EOF\nprint(1)\nEOF",
        "curl https://x > out.json; python3 report.py out.json",
        "diff <(curl https://a) <(curl https://b)",
        "sh <<EOF\ncurl https://x\nEOF",
    ] {
        let got = ways(command);
        assert!(got.is_empty(), "{command:?}: {got:?}");
    }
}
