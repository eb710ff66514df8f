use pev_protocol::{Finding, LintCode, LintResult, LintStatus};

use super::*;

fn finding(i: usize) -> Finding {
    let code = if i.is_multiple_of(3) {
        LintCode::BoundViolation
    } else {
        LintCode::SensitiveDataExposure
    };
    let mut f = Finding::step(
        code,
        (i, &format!("step-{i}")),
        format!("/steps/{i}/parameters/a~1b"),
        format!("line one\nline \"two\"\t{i} ü 😀 \u{1}"),
    );
    if i.is_multiple_of(2) {
        f.line = Some(i + 1);
        f.column = Some(7);
    }
    f
}

fn result(errors: usize, warnings: usize) -> LintResult {
    LintResult {
        status: LintStatus::Error,
        risk_score: 0.35,
        errors: (0..errors).map(finding).collect(),
        warnings: (errors..errors + warnings).map(finding).collect(),
    }
}

fn ours(result: &LintResult) -> Vec<u8> {
    let mut out = Vec::new();
    write(result, &mut out).unwrap();
    out
}

#[test]
fn every_size_is_written_as_to_writer_pretty_writes_it() {
    let sizes = [(0, 0), (1, 0), (0, 1), (2, 3), (4096, 0), (0, 4096), (1, 4095), (5000, 3001)];
    for (errors, warnings) in sizes.into_iter().chain([(CHUNK * 5 + 1, 0), (CHUNK * 4, CHUNK)]) {
        let result = result(errors, warnings);
        let theirs = serde_json::to_vec_pretty(&result).unwrap();
        let ours = ours(&result);
        assert!(ours == theirs, "{errors} errors, {warnings} warnings: the outputs differ");
    }
}

#[test]
fn a_plan_level_finding_is_written_as_serde_would() {
    let mut result = result(4100, 0);
    result.errors[7] = Finding::plan(LintCode::BoundViolation, "", "");
    assert_eq!(ours(&result), serde_json::to_vec_pretty(&result).unwrap());
}

/// A writer that fails after `left` bytes, as a closed pipe would.
struct Failing {
    left: usize,
}

impl Write for Failing {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if bytes.len() > self.left {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "closed"));
        }
        self.left -= bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_write_that_fails_mid_report_is_an_error_not_a_hang() {
    let result = result(CHUNK * 9, 0);
    let err = write(&result, &mut Failing { left: 1_000_000 }).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
}
