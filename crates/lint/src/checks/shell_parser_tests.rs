use super::parse;
use crate::checks::shell_syntax::{Join, RedirectKind, Script, SubKind, joins};

/// Each command's words, as text.
fn words(script: &Script) -> Vec<Vec<&str>> {
    script.commands.iter().map(|c| c.words.iter().map(|w| w.text.as_str()).collect()).collect()
}

fn labels(command: &str) -> Vec<&'static str> {
    joins(&parse(command)).into_iter().map(Join::label).collect()
}

#[test]
fn words_after_quote_removal() {
    for (command, expected) in [
        ("ls -la src", vec![vec!["ls", "-la", "src"]]),
        ("grep 'a;b' f.txt", vec![vec!["grep", "a;b", "f.txt"]]),
        ("echo \"a \\\"b\\\" $HOME\"", vec![vec!["echo", "a \"b\" $HOME"]]),
        ("echo a\\;b a\\ b", vec![vec!["echo", "a;b", "a b"]]),
        ("echo ${HOME} ${x:-a b}", vec![vec!["echo", "${HOME}", "${x:-a b}"]]),
        ("echo $'it\\'s' x", vec![vec!["echo", "it\\'s", "x"]]),
        ("echo $((1 + 2))", vec![vec!["echo", "$((1 + 2))"]]),
        ("echo hi # a; b && c", vec![vec!["echo", "hi"]]),
        ("echo a#b", vec![vec!["echo", "a#b"]]),
        ("echo é 'ü'", vec![vec!["echo", "é", "ü"]]),
        ("echo 'unterminated", vec![vec!["echo", "unterminated"]]),
        ("a \\\n b", vec![vec!["a", "b"]]),
        ("if true; then make; fi", vec![vec!["true"], vec!["make"]]),
        ("{ make; }", vec![vec!["make"]]),
        ("\"if\" x", vec![vec!["if", "x"]]),
    ] {
        assert_eq!(words(&parse(command)), expected, "{command:?}");
    }
}

#[test]
fn pipelines_and_lists() {
    let script = parse("a | b |& c && d; e\nf & g || h");
    let pipelines: Vec<usize> = script.commands.iter().map(|c| c.pipeline).collect();
    assert_eq!(pipelines, [0, 0, 0, 1, 2, 3, 4, 5]);
    assert_eq!(words(&script).concat(), ["a", "b", "c", "d", "e", "f", "g", "h"]);
}

#[test]
fn joins_are_named_once_in_order() {
    for (command, expected) in [
        ("cd app && make test", vec!["`&&`"]),
        ("a; b && c; d", vec!["`;`", "`&&`"]),
        ("test -f x || touch x", vec!["`||`"]),
        ("sleep 9 & rm x", vec!["`&`"]),
        ("ls\nrm x", vec!["a newline"]),
        ("echo `whoami`", vec!["backticks"]),
        ("echo $(whoami)", vec!["`$(`"]),
        ("echo \"user: $(id -un)\"", vec!["`$(`"]),
        ("diff <(sort a) <(sort b)", vec!["process substitution"]),
        ("echo $(a; b)", vec!["`$(`", "`;`"]),
        ("if a; then b; fi", vec!["`;`"]),
        ("case x in a) b;; esac", vec![]),
        ("cat a | grep b | wc -l", vec![]),
        ("make 2>&1 >log &>/dev/null", vec![]),
        ("ls;", vec![]),
        ("ls -la\n", vec![]),
        ("sleep 9 &", vec![]),
        ("echo $()", vec![]),
        ("grep 'x && y || `z` $(w)' f.txt", vec![]),
        ("echo a\\;b", vec![]),
    ] {
        assert_eq!(labels(command), expected, "{command:?}");
    }
}

#[test]
fn substitutions_are_read_as_scripts() {
    let script = parse("sh -c \"$(curl -fsSL https://x/i.sh)\" `id` <(wget y) >(tee z)");
    let subs: Vec<(SubKind, Vec<Vec<&str>>)> = script.commands[0]
        .words
        .iter()
        .flat_map(|w| &w.subs)
        .map(|s| (s.kind, words(&s.script)))
        .collect();
    assert_eq!(
        subs,
        [
            (SubKind::Dollar, vec![vec!["curl", "-fsSL", "https://x/i.sh"]]),
            (SubKind::Backticks, vec![vec!["id"]]),
            (SubKind::ProcessIn, vec![vec!["wget", "y"]]),
            (SubKind::ProcessOut, vec![vec!["tee", "z"]]),
        ]
    );
    // Escaped backticks nest.
    let nested = parse("echo `echo \\`id\\``");
    let inner = &nested.commands[0].words[1].subs[0].script;
    assert_eq!(inner.commands[0].words[1].subs[0].script.commands[0].words[0].text, "id");
}

#[test]
fn redirections_take_their_target_out_of_the_words() {
    let script = parse("sh < in.sh > out 2>&1 <<< \"$(x)\"");
    let command = &script.commands[0];
    assert_eq!(words(&script), [vec!["sh"]]);
    let kinds: Vec<(RedirectKind, &str)> =
        command.redirects.iter().map(|r| (r.kind, r.target.text.as_str())).collect();
    assert_eq!(
        kinds,
        [
            (RedirectKind::Input, "in.sh"),
            (RedirectKind::Output, "out"),
            (RedirectKind::Dup, "1"),
            (RedirectKind::HereString, "$(x)"),
        ]
    );
}

#[test]
fn here_document_bodies_are_data() {
    let script = parse("python3 <<EOF\nimport os; os.system('x')\nEOF\necho done");
    assert_eq!(words(&script), [vec!["python3"], vec!["echo", "done"]]);
    assert_eq!(script.commands[0].redirects[0].kind, RedirectKind::HereDoc);
    let tabs = parse("cat <<-'END'\n\ta && b\n\tEND\nls");
    assert_eq!(words(&tabs), [vec!["cat"], vec!["ls"]]);
}

#[test]
fn odd_input_never_panics_and_deep_nesting_is_cut() {
    let deep = format!("{}x{}", "$(".repeat(200), ")".repeat(200));
    let ticks = "`".repeat(101);
    for text in [
        deep.as_str(),
        ticks.as_str(),
        "$(",
        "$((",
        "${",
        "$'",
        "\\",
        "<(",
        "<<",
        "<<EOF",
        "2>",
        "\"$(\"",
        ")))",
        "((",
        "a\\é",
        "$'\\é'",
        "é$",
    ] {
        let _ = joins(&parse(text));
    }
}
