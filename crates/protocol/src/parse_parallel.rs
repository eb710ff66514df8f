//! A large JSON plan's steps read on two threads.
//!
//! Reading a 100,000-step plan (28 MB) is mostly deserialising its steps, one after another, and
//! each step can be read on its own. So the text is first scanned, without deserialising
//! anything, for where the `steps` array and each of its elements start and end ([`layout`]);
//! then the elements are read in runs of [`RUN`]: the calling thread reads the even runs into
//! the plan's `Vec`, one helper thread the odd runs, which it hands over as it finishes them, so
//! they are put in order with little held at any time.
//!
//! The result must be exactly what `serde_json::from_str::<Plan>` gives for the whole text, so
//! this path declines (returns `None`, and the caller reads the text the ordinary way) whenever
//! it cannot be sure: the text is not an object with one `steps` array of objects, something
//! between the elements is not a comma or white space, the text nests deeper than
//! [`MAX_DEPTH`] (each element is read as a text of its own, and serde_json's limit of 128
//! levels would otherwise count two fewer), or any part fails to deserialise. The scan reads
//! strings only far enough to skip them; everything inside an element is checked by serde_json
//! when the element is read, and everything outside the array by reading the plan's text with
//! the array emptied (`"steps":[]`), which also rejects a second `steps` key.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use super::{StepFinisher, step};
use crate::plan::{Plan, Step};

/// Texts shorter than this are read on one thread: a thread costs more than it saves.
const MIN_BYTES: usize = 512 * 1024;
/// Plans with fewer steps are read on one thread.
const MIN_STEPS: usize = 2048;
/// Steps per run handed to one thread.
const RUN: usize = 1024;
/// Deeper texts are left to serde_json's own reading, whose depth limit then applies as usual.
const MAX_DEPTH: usize = 100;

/// Where the steps are in the text.
#[derive(Debug, PartialEq, Eq)]
struct Layout {
    /// The byte offsets of the array's `[` and `]`.
    open: usize,
    close: usize,
    /// Each element's text, `text[start..end]`, an object.
    elements: Vec<(usize, usize)>,
}

/// How [`parse_from`] reads: from what size on, and whether on two threads.
#[derive(Debug, Clone, Copy)]
struct Reading {
    min_bytes: usize,
    min_steps: usize,
    threads: bool,
}

/// Reads the plan with its steps on two threads (on one when the process has one CPU: the
/// layout still sizes the list of steps once, where serde would grow it by copying), each step
/// finished (references indexed, lists trimmed); `None` when the text is small, not shaped as
/// this path needs, or not a valid plan.
pub(super) fn parse(text: &str) -> Option<Plan> {
    // The size first: asking for the parallelism reads the cgroup's files.
    if text.len() < MIN_BYTES {
        return None;
    }
    let threads = std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2);
    parse_from(text, Reading { min_bytes: MIN_BYTES, min_steps: MIN_STEPS, threads })
}

/// [`parse`] with its thresholds given (the tests read small plans this way).
fn parse_from(text: &str, reading: Reading) -> Option<Plan> {
    if text.len() < reading.min_bytes {
        return None;
    }
    let layout = layout(text)?;
    if layout.elements.len() < reading.min_steps {
        return None;
    }
    let (head, tail) = (text.get(..=layout.open)?, text.get(layout.close..)?);
    let mut rest = String::with_capacity(head.len() + tail.len());
    rest.push_str(head);
    rest.push_str(tail);
    let mut plan: Plan = serde_json::from_str(&rest).ok()?;
    plan.steps = read_steps(text, &layout.elements, reading.threads)?;
    Some(plan)
}

/// Reads the elements in runs, even runs here and odd runs on a helper thread (all here
/// without `threads`).
fn read_steps(text: &str, elements: &[(usize, usize)], threads: bool) -> Option<Vec<Step>> {
    let runs: Vec<&[(usize, usize)]> = elements.chunks(RUN).collect();
    let stop = AtomicBool::new(false);
    let mut steps = Vec::with_capacity(elements.len());
    let mut finisher = StepFinisher::default();
    let ok = std::thread::scope(|scope| {
        let (send, receive) = mpsc::channel::<Option<Vec<Step>>>();
        let helper = std::thread::Builder::new().name("pev-parse".into());
        let helper = threads.then(|| {
            helper.spawn_scoped(scope, {
                let (runs, stop) = (&runs, &stop);
                move || {
                    let mut finisher = StepFinisher::default();
                    for run in runs.iter().skip(1).step_by(2) {
                        let mut out = Vec::with_capacity(run.len());
                        let read = read_run(text, run, &mut finisher, &mut out, stop);
                        if send.send(read.then_some(out)).is_err() || !read {
                            return;
                        }
                    }
                }
            })
        });
        // No thread wanted, or none to be had: every run is read here.
        let helper = helper.and_then(Result::ok);
        let mut ok = true;
        for (k, run) in runs.iter().enumerate() {
            ok = if k % 2 == 0 || helper.is_none() {
                read_run(text, run, &mut finisher, &mut steps, &stop)
            } else {
                match receive.recv() {
                    Ok(Some(mut theirs)) => {
                        steps.append(&mut theirs);
                        true
                    }
                    Ok(None) | Err(_) => false,
                }
            };
            if !ok {
                stop.store(true, Ordering::Relaxed);
                break;
            }
        }
        drop(receive);
        // A helper that panicked has read nothing that can be trusted.
        let joined = helper.is_none_or(|handle| handle.join().is_ok());
        ok && joined
    });
    (ok && steps.len() == elements.len()).then_some(steps)
}

/// Deserialises and finishes the steps of one run into `out`; false when one fails or the
/// other thread gave up.
fn read_run(
    text: &str,
    run: &[(usize, usize)],
    finisher: &mut StepFinisher,
    out: &mut Vec<Step>,
    stop: &AtomicBool,
) -> bool {
    for &(start, end) in run {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        // Read in place: a `Step` is some 300 bytes, and handing one back through `Result`,
        // `Option` and `push` copied it several times (a tenth of the parse, as `memmove`).
        out.push(Step::default());
        let Some(step) = out.last_mut() else { return false };
        if !text.get(start..end).is_some_and(|t| step::read(t, step)) {
            return false;
        }
        finisher.finish(step);
    }
    true
}

/// JSON's white space.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn skip_space(b: &[u8], mut i: usize) -> usize {
    while b.get(i).copied().is_some_and(is_space) {
        i += 1;
    }
    i
}

/// Where the `steps` array of the top-level object and its elements are, when the text has
/// the shape this path reads: see the module's description.
fn layout(text: &str) -> Option<Layout> {
    /// Inside the steps array, between elements.
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Between {
        /// Just after `[`: an element or `]`.
        First,
        /// Just after an element: `,` or `]`.
        Separator,
        /// Just after `,`: an element.
        Element,
    }
    let b = text.as_bytes();
    let mut i = skip_space(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    let mut depth = 0usize;
    // At depth 1 the next string is a key; whether the last key read there was `steps`.
    let (mut key_next, mut steps_key) = (false, false);
    let (mut open, mut close) = (None, None);
    let mut in_steps = false;
    let mut between = Between::First;
    let mut element_start = 0;
    let mut elements = Vec::new();
    while let Some(&c) = b.get(i) {
        let between_elements = in_steps && depth == 2;
        match c {
            b'"' => {
                if between_elements {
                    return None;
                }
                let end = skip_string(b, i + 1)?;
                if depth == 1 && key_next {
                    steps_key = b.get(i + 1..end - 1) == Some(b"steps".as_slice());
                    key_next = false;
                }
                i = end;
                continue;
            }
            b'{' | b'[' => {
                if depth == 1 && steps_key && c == b'[' && open.is_none() {
                    open = Some(i);
                    in_steps = true;
                    between = Between::First;
                } else if between_elements {
                    if c != b'{' || between == Between::Separator {
                        return None;
                    }
                    element_start = i;
                }
                depth += 1;
                if depth > MAX_DEPTH {
                    return None;
                }
                if depth == 1 {
                    key_next = true;
                }
            }
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if in_steps && depth == 2 {
                    elements.push((element_start, i + 1));
                    between = Between::Separator;
                } else if in_steps && depth == 1 {
                    if c != b']' || between == Between::Element {
                        return None;
                    }
                    close = Some(i);
                    in_steps = false;
                } else if depth == 0 {
                    if skip_space(b, i + 1) != b.len() {
                        return None;
                    }
                    break;
                }
            }
            b',' => {
                if depth == 1 {
                    key_next = true;
                    steps_key = false;
                } else if between_elements {
                    if between != Between::Separator {
                        return None;
                    }
                    between = Between::Element;
                }
            }
            _ if is_space(c) => {}
            _ => {
                if between_elements {
                    return None;
                }
            }
        }
        i += 1;
    }
    if depth != 0 {
        return None;
    }
    Some(Layout { open: open?, close: close?, elements })
}

/// The offset just past the `"` that closes the string whose text starts at `i`, or `None` at
/// the end of the text. Eight bytes at a time: most of a plan's text is inside strings.
fn skip_string(b: &[u8], mut i: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let has = |word: u64, byte: u8| {
        let x = word ^ (ONES * u64::from(byte));
        x.wrapping_sub(ONES) & !x & HIGH
    };
    loop {
        while let Some(chunk) = b.get(i..i + 8) {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            let found = has(u64::from_le_bytes(word), b'"') | has(u64::from_le_bytes(word), b'\\');
            if found != 0 {
                // The lowest flagged byte is always a real match (a false flag can only follow
                // one, through the borrow).
                i += (found.trailing_zeros() / 8) as usize;
                break;
            }
            i += 8;
        }
        match b.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
}

#[cfg(test)]
#[path = "parse_parallel_tests.rs"]
mod tests;
