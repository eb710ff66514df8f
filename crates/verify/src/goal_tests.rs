//! Tests of the goal word check (both ways, as tables of goals that change and goals that only
//! read) and of which calls count as goal actions.

use pev_protocol::tool::Effect;
use serde_json::json;

use super::*;

#[test]
fn goals_that_ask_for_a_change() {
    for goal in [
        "Change the site background to dark green",
        "change the site background to dark green",
        "CHANGE THE SITE BACKGROUND",
        "Fix the failing test in src/lib.rs",
        "Please add a README",
        "Create a file hello.txt containing hi",
        "Delete the temporary files",
        "Rename foo.rs to bar.rs",
        "Set the log level to debug",
        "Make the build pass",
        "Install the dependencies and run the tests",
        "Bump the version to 1.2.0",
        "Refactor the parser",
        "The background should be changed to green",
        "Make sure style.css is updated",
        "Adds a dark theme",
        "Start patching the config, then report",
        "Read config.toml and update the port",
        "Write the summary to notes.md",
        "Deploy: the app",
        "Don't read anything, just write out.txt",
        "Without breaking anything, update the README",
        "Goal: adds a footer",
        "Raise the request timeout in config.toml to 30 seconds",
        "Lower the log level to warn",
        "Increase the retry count",
        "Reduce the image sizes",
        // A read-only lead does not excuse a later request.
        "Check the tests and fix any that fail",
        "Find the bug and fix it",
        "Check whether the port is set and set it to 8080 if not",
        "Check if the tests pass and then fix them",
        "List the files, delete the empty ones",
        "Verify the config and update it if needed",
        "Read the README to update the docs",
        "Report the build status and then bump the version",
        // A negation reaches only its own verbs.
        "Do not modify the tests; fix the bug instead",
        "Do not modify the tests, fix the bug",
        "Don't delete the file, rename it",
        "List the files that were not updated and update them",
        "Without changing the API, refactor the parser",
        "Never commit secrets; remove the API key from config.py",
        "Add no new dependencies, and fix the bug",
        "No, delete the temp file instead",
        "Check if the file exists; if not create it",
        // Requests phrased as questions, and questions followed by requests.
        "Can you fix the failing test?",
        "Which file holds the port? Change it to 8080.",
        "What is wrong with the build? Fix it.",
        "If the config is missing, create it",
        "Please make the tests pass",
    ] {
        assert!(goal_asks_for_change(goal), "{goal:?} asks for a change");
    }
}

#[test]
fn goals_that_only_read() {
    for goal in [
        "List the files in src",
        "Read the CSS and report the background colour",
        "Find every TODO in the repository",
        "Summarize the README",
        "Check the tests pass and count them",
        "Count the lines of code",
        "Summarize changes in the last commit",
        "Report the build status",
        "What is the latest update?",
        "List the files without changing anything",
        "Do not modify anything; report the size of style.css",
        // A file name's dot does not end the sentence that a read verb leads.
        "Check whether site/style.css is updated",
        "Verify that config.toml was changed",
        "Do not ever modify files, only read them",
        "Never delete anything. Count the files.",
        "Report the settings",
        "Address book lookup: find Alice",
        "",
        "   ",
        "Readme reader: list sections",
        // Negations that cover several verbs, and verbs whose object is nothing.
        "List the files but do not change or delete anything",
        "Do not change, move or delete any file; list them",
        "Do not change, move, or delete anything",
        "Avoid modifying anything; summarize the README",
        "Don't touch anything, just list the files",
        "Make no changes to the files, only list them",
        "Change nothing; count the lines",
        "List, but never modify, the config files",
        "Never ever edit/delete anything; list the files",
        "Read the docs without making any edits",
        // Descriptions inside read-only requests.
        "Check whether the port is set in config.toml",
        "Verify that the version was bumped",
        "Report which files were modified in the last commit",
        "List the files modified today",
        "List the files modified and created today",
        "List the files built and written by the last job",
        "Keep calling the status endpoint and report the result",
        "Show the lines changed by the last commit",
        "Summarize what was changed in the last commit",
        "Find out whether the cache was reset",
        "Tell me if anything was deleted",
        "Explain how to configure the server",
        "Describe how the build is made",
        "Read the config and tell me if the port is set",
        "Audit the repository for files created by the build without altering them",
        // Questions.
        "Which files changed yesterday?",
        "How do I add a user?",
        "Why did the deploy fail?",
        "What should I change to fix the flaky test?",
    ] {
        assert!(!goal_asks_for_change(goal), "{goal:?} does not ask for a change");
    }
}

#[test]
fn inflections_count_but_lookalikes_do_not() {
    assert!(goal_asks_for_change("files changed by the script must be reviewed"));
    assert!(goal_asks_for_change("keep setting it"));
    assert!(goal_asks_for_change("it was rewritten"));
    assert!(!goal_asks_for_change("read the bed file"));
    assert!(!goal_asks_for_change("list the ones you need"));
    assert!(!goal_asks_for_change("report addresses"));
}

#[test]
fn goal_actions_are_writes_execs_and_unsafe_requests() {
    assert!(is_goal_action("file.write", Effect::Write, &json!({"path": "a"})));
    assert!(is_goal_action("file.patch", Effect::Write, &json!({})));
    assert!(is_goal_action("shell.exec", Effect::Exec, &json!({"command": "true"})));
    assert!(!is_goal_action("file.read", Effect::Read, &json!({"path": "a"})));
    assert!(!is_goal_action("file.list", Effect::Read, &json!({})));
    for method in ["POST", "put", "DELETE", "patch"] {
        assert!(is_goal_action("http.request", Effect::Network, &json!({"method": method})));
    }
    for method in ["GET", "get", " HEAD ", "options"] {
        assert!(!is_goal_action("http.request", Effect::Network, &json!({"method": method})));
    }
    assert!(!is_goal_action("http.request", Effect::Network, &json!({"url": "http://x"})));
    assert!(!is_goal_action("http.request", Effect::Network, &json!({"method": 5})));
}
