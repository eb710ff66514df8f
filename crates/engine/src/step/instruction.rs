//! Running an instruction step (no `tool`): the executor model works through a [`ToolGate`]
//! that sends every call down the same journaled path as a tool step's call; then tier 1 checks
//! the step's assertions against the workspace, the plan-execution mismatch rule holds the step
//! to the files it named (`pev_verify::mismatch`), and a judge model looks at what tier 1
//! cannot check. Failed attempts are retried with specific feedback.

use std::collections::HashMap;
use std::sync::Arc;

use pev_protocol::event::EventBody;
use pev_protocol::run::{FileMutation, StepStatus};
use pev_protocol::tool::Effect;
use pev_protocol::{Assertion, Step};
use pev_store::StoreError;
use serde_json::{Value, json};

use crate::call::{Before, Call, CallEnd, target_path, watched_paths};
use crate::continuation::Continuation;
use crate::instruct::{GateResult, InstructionRequest, Interruption, ToolGate};
use crate::state::step::{Shared, StepReport};
use crate::step::approval::ask_approval;
use crate::step::invoke::invoke;
use crate::step::judge::judge;
use pev_providers::BoxFuture;

/// The engine's [`ToolGate`] for one attempt of one step.
struct StepGate<'a> {
    shared: &'a Shared,
    step: &'a Step,
    report: &'a mut StepReport,
    calls: u32,
    /// Paths the gate's calls wrote (their mutations are recorded per call).
    touched: Vec<String>,
    /// Diffs of the files this attempt changed, for the judge.
    diffs: Vec<String>,
    /// The journal failed: the step must end, and the error is the run's.
    journal_error: Option<StoreError>,
    /// A resumed attempt's finished calls, answered from the journal while the executor asks
    /// for them in order.
    continuation: Option<&'a mut Continuation>,
    /// Child runs this attempt has delegated (loop mode's `delegate`): the next one's number.
    delegations: u32,
}

impl ToolGate for StepGate<'_> {
    fn call<'b>(&'b mut self, wire: &'b str, arguments: Value) -> BoxFuture<'b, GateResult> {
        Box::pin(async move {
            match self.call_inner(wire, arguments).await {
                Ok(result) => result,
                Err(e) => {
                    let message = format!("the journal failed: {e}");
                    self.journal_error = Some(e);
                    GateResult { output: Err(message), fatal: true }
                }
            }
        })
    }

    fn journal_position(&self) -> Option<u64> {
        Some(self.shared.recorder.calls_started())
    }

    fn stopped(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.shared.engine.config.cancel.cancelled())
    }

    fn recorded_hashes(&self) -> HashMap<String, Option<String>> {
        self.continuation.as_deref().map(Continuation::pending_hashes).unwrap_or_default()
    }

    fn can_delegate(&self) -> bool {
        self.shared.engine.config.models.as_ref().is_some_and(|m| m.delegator.is_some())
    }

    fn delegate<'b>(
        &'b mut self,
        delegation: pev_protocol::Delegation,
    ) -> BoxFuture<'b, Result<crate::instruct::ChildVerdict, String>> {
        Box::pin(async move {
            self.delegations += 1;
            let n = self.delegations;
            let result = crate::step::delegated::from_gate(
                self.shared,
                self.step,
                (delegation, n),
                &mut *self.report,
            )
            .await;
            match result {
                Ok(outcome) => outcome,
                Err(e) => {
                    let message = format!("the journal failed: {e}");
                    self.journal_error = Some(e);
                    Err(message)
                }
            }
        })
    }

    fn changed_files(&self) -> Vec<String> {
        // A change restored from the interrupted session counts from when the replay reaches
        // the call that made it.
        let pending = self.recorded_hashes();
        let mut out: Vec<String> = Vec::new();
        for m in self
            .report
            .mutations
            .iter()
            .filter(|m| !m.mutation.no_op && !pending.contains_key(&m.mutation.path))
        {
            if !out.contains(&m.mutation.path) {
                out.push(m.mutation.path.clone());
            }
        }
        out
    }
}

impl StepGate<'_> {
    /// `wire` is the name the model called; from here on the call is journaled, approved,
    /// hooked and checked under the tool's plan name. What the model reads names the tool as
    /// it knows it, by its wire name.
    async fn call_inner(&mut self, wire: &str, args: Value) -> Result<GateResult, StoreError> {
        let shared = self.shared;
        let registry = &shared.engine.registry;
        let found = registry.names().plan(wire).and_then(|plan| registry.get(plan));
        let Some(implementation) = found.map(Arc::clone) else {
            let offered = offered_tools(shared);
            let offered: Vec<&str> = offered.iter().map(|d| d.wire.as_str()).collect();
            let offered = if offered.is_empty() { "none".to_owned() } else { offered.join(", ") };
            return Ok(GateResult {
                output: Err(format!("unknown tool `{wire}`; available: {offered}")),
                fatal: false,
            });
        };
        let tool = implementation.name();
        if !tool_allowed(shared, tool) {
            return Ok(GateResult {
                output: Err(format!("the policy does not allow the tool `{wire}`")),
                fatal: false,
            });
        }
        // Finished before the crash, in this same attempt: its result, not a second run.
        if let Some(answer) = self.continuation.as_deref_mut().and_then(|c| c.answer(tool, &args)) {
            self.calls += 1;
            if let Some(t) = target_path(implementation.effect(), &args)
                && !self.touched.contains(&t)
            {
                self.touched.push(t);
            }
            // The journaled output is checked as a new one would be: what it says about silent
            // failures, and what the hooks make of it.
            if let Ok(output) = &answer {
                for warning in pev_verify::silent_failures(tool, output) {
                    let message = format!("step `{}`: {warning}", self.step.id);
                    shared.recorder.emit(EventBody::Warning {
                        step: Some(self.step.id.as_str().to_owned()),
                        message: message.clone(),
                    })?;
                    self.report.warnings.push(message);
                }
            }
            let hooked = (tool, &args);
            let decision =
                crate::step::hooks::after_call(shared, self.step, hooked, &answer, self.report)
                    .await?;
            let output = with_hook_answer(answer, &decision)
                .map_err(|message| registry.names().in_wire_terms(&message));
            return Ok(GateResult { output, fatal: false });
        }
        // A test the step must make pass is the check, not the work: pev's own tools do not
        // change it for a step that may not (the model is told why, and what to do instead).
        if let Some(refused) = target_path(implementation.effect(), &args).and_then(|t| {
            shared.oracle.refusal(&shared.engine.ctx.workspace, self.step, (tool, &t, &args))
        }) {
            shared.recorder.emit(EventBody::Warning {
                step: Some(self.step.id.as_str().to_owned()),
                message: format!("step `{}`: a {wire} call was {refused}", self.step.id),
            })?;
            self.report.warnings.push(format!("step `{}`: {refused}", self.step.id));
            return Ok(GateResult { output: Err(refused), fatal: false });
        }
        if let Some(glob) = shared.approve_globs.iter().find(|g| g.matches(tool)) {
            let reason = format!("the policy's approve_tools lists `{}`", glob.as_str());
            match ask_approval(shared, self.step, tool, &args, reason).await? {
                crate::engine::Approval::Yes => {}
                crate::engine::Approval::No => {
                    return Ok(GateResult {
                        output: Err(format!("a person refused the {wire} call")),
                        fatal: false,
                    });
                }
                crate::engine::Approval::Defer => {
                    return Ok(GateResult {
                        output: Err(format!(
                            "the {wire} call needs a person's approval and nobody can answer now"
                        )),
                        fatal: true,
                    });
                }
            }
        }
        let hooked = (tool, &args);
        if let Some(reason) =
            crate::step::hooks::before_call(shared, self.step, hooked, self.report).await?
        {
            // The model is told why and may try something else; the call is not made.
            return Ok(GateResult { output: Err(format!("hook denied: {reason}")), fatal: false });
        }
        // The model turn that asked for this call is spent: journal the spend before the call's
        // intent (which a write makes durable), so a crash cannot lose it.
        if let Some(models) = &shared.engine.config.models {
            shared.recorder.emit(EventBody::Usage { usage: (models.usage)() })?;
        }
        let effect = implementation.effect();
        let target = target_path(effect, &args);
        let watched: Vec<String> = target.iter().cloned().collect();
        if let Some(t) = &target
            && !self.touched.contains(t)
        {
            self.touched.push(t.clone());
        }
        let call = Call {
            step: self.step,
            tool,
            effect,
            args: &args,
            watched: &watched,
            target: target.as_deref(),
        };
        self.calls += 1;
        // The call a kill interrupted, asked for again by a continued attempt: applied already
        // (its content hash shows it) is recovered, not applied twice; otherwise it runs.
        let interrupted = self.continuation.as_deref_mut().and_then(|c| c.in_flight(tool, &args));
        // What settling says (a command runs again) stays a warning the judge sees.
        let settled = match interrupted {
            Some(recovery) => {
                crate::step::recover::settle(shared, &call, recovery, self.report).await?
            }
            None => None,
        };
        let (before, mut end) = match settled {
            Some(known) => known,
            None => invoke(shared, &call, &*implementation, self.report, Some(self.calls)).await?,
        };
        let first_new = self.report.mutations.len();
        crate::step::check::record_changes(shared, &call, &before, &mut end, self.report)?;
        for m in self.report.mutations.iter().skip(first_new) {
            // A command watches no file: what it changed was before as its inventory saw it (a
            // diff against nothing showed a changed file to the judge as made from scratch).
            let before_text = before
                .contents
                .get(&m.mutation.path)
                .and_then(Option::as_deref)
                .or_else(|| before.inventoried(&m.mutation.path));
            if let Some(diff) = diff_for_judge(shared, &m.mutation, before_text) {
                self.diffs.push(diff);
            }
            // Recorded as this call's change: not recorded again, as the executor's, when the
            // attempt ends (a file a command changed was listed twice, as two changes).
            if !self.touched.contains(&m.mutation.path) {
                self.touched.push(m.mutation.path.clone());
            }
        }
        if let Ok(output) = &end.output {
            if pev_verify::is_goal_action(tool, effect, &args) {
                self.report.slot.goal_action = true;
            }
            for warning in pev_verify::silent_failures(tool, output) {
                let message = format!("step `{}`: {warning}", self.step.id);
                shared.recorder.emit(EventBody::Warning {
                    step: Some(self.step.id.as_str().to_owned()),
                    message: message.clone(),
                })?;
                self.report.warnings.push(message);
            }
        }
        let decision =
            crate::step::hooks::after_call(shared, self.step, hooked, &end.output, self.report)
                .await?;
        // The tools word their errors with plan names; the model knows only the wire names.
        let output = with_hook_answer(end.output, &decision)
            .map_err(|message| registry.names().in_wire_terms(&message));
        Ok(GateResult { output, fatal: false })
    }
}

/// Whether the executor may call the tool whose plan name is `tool` (the policy's allow/deny,
/// as the agent passed it; everything in `pev run`, which has no model).
fn tool_allowed(shared: &Shared, tool: &str) -> bool {
    shared
        .engine
        .config
        .models
        .as_ref()
        .is_none_or(|m| m.allowed_tools.is_empty() || m.allowed_tools.iter().any(|t| t == tool))
}

/// The registry's tools the executor is offered, in plan-name order: each is shown to the model
/// under its wire name (`ToolSpec::from`), and named by it when a call goes wrong.
fn offered_tools(shared: &Shared) -> Vec<pev_tools::ToolDefinition> {
    let mut tools = shared.engine.registry.definitions();
    tools.retain(|d| tool_allowed(shared, d.name));
    tools
}

/// What the model sees of a call after `post_tool_use`: the output with the hooks' context
/// added, or, when a hook denied it, an error that says the call ran and why it is rejected.
fn with_hook_answer(
    output: Result<Value, String>,
    decision: &crate::hooks::HookDecision,
) -> Result<Value, String> {
    if !decision.allowed() {
        let reason = decision.reason_or_default(crate::hooks::HookKind::PostToolUse);
        let shown = match &output {
            Ok(Value::String(text)) => text.clone(),
            Ok(value) => value.to_string(),
            Err(error) => format!("error: {error}"),
        };
        let context =
            decision.context.as_ref().map(|c| format!("\nhook context: {c}")).unwrap_or_default();
        return Err(format!(
            "hook denied: {reason}\n(the call was made; its result: {shown}){context}"
        ));
    }
    let Some(context) = &decision.context else { return output };
    match output {
        Ok(Value::Object(mut map)) => {
            map.insert("hook_context".to_owned(), Value::String(context.clone()));
            Ok(Value::Object(map))
        }
        Ok(Value::String(text)) => Ok(Value::String(format!("{text}\n\nhook context: {context}"))),
        Ok(other) => Ok(json!({ "output": other, "hook_context": context })),
        Err(error) => Err(format!("{error}\n\nhook context: {context}")),
    }
}

/// Puts a continued attempt's journaled changes back into the step's report (once): the
/// mutations (marked restored, so the run does not count them twice) and the evidence lines
/// their calls gave, the goal action, the paths written and the judge's diffs (from the
/// journal's before-contents).
fn restore(
    (shared, id): (&Shared, &str),
    c: &Continuation,
    report: &mut StepReport,
    (touched, diffs): (&mut Vec<String>, &mut Vec<String>),
) -> Result<(), StoreError> {
    let store = pev_store::Store::open_existing(shared.recorder.journal().location()).ok();
    for (m, before_sha) in &c.mutations {
        let before = before_sha
            .as_deref()
            .and_then(|sha| store.as_ref().and_then(|s| s.blob(sha).ok().flatten()));
        if let Some(diff) = diff_for_judge(shared, &m.mutation, before.as_deref()) {
            diffs.push(diff);
        }
        if !touched.contains(&m.mutation.path) {
            touched.push(m.mutation.path.clone());
        }
        report.mutations.push(m.clone());
    }
    report.restored_mutations = c.mutations.len();
    report.slot.evidence.extend(c.evidence.iter().cloned());
    report.slot.goal_action |= c.goal_action;
    // Changes the killed session made but did not journal: worked out now, journaled, and
    // (not restored) counted in the run's changes by this session.
    for (path, before, before_sha) in &c.unjournaled {
        let after = shared.engine.ctx.workspace.read(path).ok();
        let mutation = pev_verify::mutation(path, before.as_deref(), after.as_deref());
        if let Some(diff) = diff_for_judge(shared, &mutation, before.as_deref()) {
            diffs.push(diff);
        }
        if !touched.contains(path) {
            touched.push(path.clone());
        }
        shared.recorder.record(pev_store::Record::Mutation(pev_store::MutationRecord {
            run_id: shared.recorder.run_id().to_owned(),
            step_id: id.to_owned(),
            mutation: mutation.clone(),
            before_sha256: before_sha.clone(),
            after_sha256: after.as_deref().map(crate::digest::sha256_hex),
        }))?;
        report.slot.evidence.push(format!(
            "{path} was changed by a call the interrupted session finished (worked out from the \
             journal's before-content)"
        ));
        report.mutations.push(crate::call::StepMutation { step: id.to_owned(), mutation });
    }
    Ok(())
}

/// A unified diff of a mutation, capped, for the judge.
fn diff_for_judge(
    shared: &Shared,
    mutation: &FileMutation,
    before: Option<&[u8]>,
) -> Option<String> {
    let after = shared.engine.ctx.workspace.read(&mutation.path).ok();
    crate::verdict::unasserted::unified_diff(
        &mutation.path,
        before.unwrap_or_default(),
        after.as_deref().unwrap_or_default(),
    )
}

/// Runs the attempts of an instruction step.
pub(crate) async fn run(
    shared: &Shared,
    step: &Step,
    inputs: &HashMap<String, Value>,
    mut continuation: Option<Continuation>,
    report: &mut StepReport,
) -> Result<(), StoreError> {
    let Some(models) = shared.engine.config.models.clone() else {
        crate::state::step::fail(
            &mut report.slot,
            "the step has no `tool` and no executor model is configured (use `pev agent`)",
        );
        return Ok(());
    };
    let id = step.id.as_str();
    let workspace = &shared.engine.ctx.workspace;
    // The files the step says it will change, taken before it runs: watched, so a change by any
    // means (a shell command too) is seen, and held against what the step changed.
    let intent = pev_verify::StepIntent::of(step);
    // A test the step must make pass is not its target: oracle files it may not change are
    // left out of what it is held to.
    let named: Vec<String> = if models.executor.keeps_own_plan() {
        Vec::new()
    } else {
        pev_verify::named_files(&intent, workspace)
            .into_iter()
            .filter(|p| !shared.oracle.protects(step, p))
            .collect()
    };
    let mut watched = watched_paths(step, None);
    for path in &named {
        if !watched.contains(path) {
            watched.push(path.clone());
        }
    }
    let max_attempts = step.max_attempts.unwrap_or(3).max(1);
    let tools: Vec<pev_providers::ToolSpec> =
        offered_tools(shared).iter().map(pev_providers::ToolSpec::from).collect();
    let mut feedback: Vec<String> = Vec::new();
    let mut first_attempt = true;
    loop {
        report.slot.attempts += 1;
        report.slot.status = StepStatus::InProgress;
        report.slot.error = None;
        report.slot.by_assertion = false;
        report.slot.judge_rejected = false;
        report.slot.mismatched = false;
        shared.recorder.record(pev_store::Record::StepState(
            report.slot.to_stored(shared.recorder.run_id(), id),
        ))?;
        shared
            .recorder
            .emit(EventBody::StepStarted { step: id.to_owned(), attempt: report.slot.attempts })?;
        let before = Before::take(&shared.engine, &watched);
        let request = InstructionRequest {
            run_goal: shared.plan.goal.clone(),
            step: step.clone(),
            attempt: report.slot.attempts,
            max_attempts,
            inputs: inputs.clone(),
            feedback: feedback.clone(),
            tools: tools.clone(),
            budget_note: (models.budget_note)(),
        };
        let warnings_before = report.warnings.len();
        let mutations_before = report.mutations.len();
        // A continued attempt: what it changed before the crash is its evidence again.
        let (mut touched, mut diffs) = (Vec::new(), Vec::new());
        // The interrupted attempt is continued once (this first attempt of the session); a
        // retry starts afresh.
        let continuing = std::mem::take(&mut first_attempt);
        if let Some(c) = continuation.as_mut().filter(|_| continuing) {
            restore((shared, id), c, report, (&mut touched, &mut diffs))?;
        }
        let mut gate = StepGate {
            shared,
            step,
            report,
            calls: 0,
            touched,
            diffs,
            journal_error: None,
            continuation: continuation.as_mut().filter(|_| continuing),
            delegations: 0,
        };
        let attempt = request.attempt;
        let outcome =
            crate::model_scope::scoped(id, attempt, models.executor.execute(&request, &mut gate))
                .await;
        // Journal the spend as it grows (a killed session's spend must survive it).
        shared.recorder.emit(EventBody::Usage { usage: (models.usage)() })?;
        let StepGate {
            report: r, calls, touched, diffs, journal_error, continuation: cont, ..
        } = gate;
        let report = r;
        // Said once, and not a warning about the work: the judge is not asked because of it.
        let mut continued: Option<String> = None;
        if let Some(c) = cont.filter(|c| c.replayed > 0) {
            let message = format!(
                "step `{id}`: continued its interrupted attempt {}: {} tool call(s) it had \
                 finished were answered from the journal, not run again",
                request.attempt, c.replayed
            );
            c.replayed = 0;
            shared
                .recorder
                .emit(EventBody::Warning { step: Some(id.to_owned()), message: message.clone() })?;
            report.warnings.push(message.clone());
            continued = Some(message);
        }
        if let Some(e) = journal_error {
            return Err(e);
        }
        let call = Call {
            step,
            tool: "executor",
            effect: Effect::Read,
            args: &Value::Null,
            watched: &watched,
            target: None,
        };
        // Files the step watches that no gate call wrote (a shell command may have): their
        // changes are the step's own.
        let untouched: Vec<String> =
            watched.iter().filter(|p| !touched.contains(p)).cloned().collect();
        let own = Call { watched: &untouched, ..call };
        let mut nothing = CallEnd::new(Ok(Value::Null));
        crate::step::check::record_changes(shared, &own, &before, &mut nothing, report)?;
        match &outcome.interrupted {
            Some(Interruption::Budget(why)) => {
                report.budget_exhausted = Some(why.clone());
                report.slot.status = StepStatus::Pending;
                report.slot.error = Some(format!("stopped: the budget ran out ({why})"));
                return Ok(());
            }
            Some(Interruption::Provider(why)) => {
                crate::state::step::fail(
                    &mut report.slot,
                    &format!("the executor model failed: {why}"),
                );
                return Ok(());
            }
            // Not a failure: the step was interrupted between tool calls, and a resume runs it
            // again. What its calls changed is recorded above.
            Some(Interruption::Stopped) => {
                report.cancelled = true;
                report.slot.status = StepStatus::Pending;
                report.slot.error = Some("stopped by a person before the step finished".into());
                return Ok(());
            }
            Some(Interruption::TurnLimit(n)) => {
                crate::state::step::fail(
                    &mut report.slot,
                    &format!("the executor used its {n} turns without finishing the step"),
                );
            }
            None => {
                let end = CallEnd::new(Ok(json!({
                    "summary": outcome.summary,
                    "turns": outcome.turns,
                    "tool_calls": calls,
                })));
                crate::step::check::check_output(shared, &call, (&before, end), inputs, report)
                    .await?;
            }
        }
        if report.slot.status == StepStatus::Done {
            // Deterministic, so before the judge: no judge's yes can make up for it.
            let changed: Vec<String> = report
                .mutations
                .iter()
                .skip(mutations_before)
                .filter(|m| !m.mutation.no_op)
                .map(|m| m.mutation.path.clone())
                .collect();
            if let Some(found) = pev_verify::mismatch(&intent, &named, &changed, workspace)
                && !checked_on_intact_oracle(shared, step, report, &changed)
            {
                report.slot.status = StepStatus::Failed;
                report.slot.mismatched = true;
                report.slot.error = Some(found.message());
            }
        }
        if report.slot.status == StepStatus::Done {
            let attempt_warnings: Vec<String> = report
                .warnings
                .iter()
                .skip(warnings_before)
                .filter(|w| continued.as_ref() != Some(*w))
                .cloned()
                .collect();
            let mutations: Vec<FileMutation> = report
                .mutations
                .iter()
                .skip(mutations_before)
                .map(|m| m.mutation.clone())
                .collect();
            let claim = outcome.summary.clone();
            judge(shared, &models, step, (claim, attempt_warnings, mutations, diffs), report)
                .await?;
            if report.budget_exhausted.is_some() {
                return Ok(());
            }
        }
        if report.slot.status == StepStatus::Done
            || report.slot.attempts >= max_attempts
            || shared.engine.config.cancel.is_cancelled()
        {
            return Ok(());
        }
        feedback.push(attempt_feedback(step, report));
        let message = format!(
            "step `{id}`: attempt {} of {max_attempts} failed: {}; trying again with feedback",
            report.slot.attempts,
            report.slot.error.as_deref().unwrap_or("unknown error")
        );
        shared
            .recorder
            .emit(EventBody::Warning { step: Some(id.to_owned()), message: message.clone() })?;
        report.warnings.push(message);
        report.cache.retry_warnings += 1;
    }
}

/// Whether the step's change is vouched for by deterministic evidence on an intact oracle: a
/// `command_succeeds` of its own passed, it changed files, and no oracle file changed without
/// permission. That outranks the mismatch heuristic (the step did change something, and the
/// check it cannot have bent says the change works).
fn checked_on_intact_oracle(
    shared: &Shared,
    step: &Step,
    report: &StepReport,
    changed: &[String],
) -> bool {
    // Only a check that runs tests vouches for the change (not one that imports or compiles it).
    let ran_check = step.assertions.iter().any(|a| {
        matches!(a, Assertion::CommandSucceeds { command, .. } if pev_verify::oracle::runs_tests(command))
    });
    let all_passed = !report.slot.assertions.is_empty()
        && report.slot.assertions.iter().all(|a| a.passed)
        && report.slot.assertions.iter().any(|a| a.kind == "command_succeeds");
    let intact = !crate::oracle::needs_pristine(
        &shared.oracle.changes(&shared.engine.ctx.workspace, &shared.plan),
    );
    ran_check && all_passed && intact && !changed.is_empty() && !shared.oracle.files.is_empty()
}

/// What the next attempt is told about this one: the error, each failed assertion with its
/// detail and recovery hint.
fn attempt_feedback(step: &Step, report: &StepReport) -> String {
    let mut out = format!(
        "Attempt {} failed: {}.",
        report.slot.attempts,
        report.slot.error.as_deref().unwrap_or("unknown error")
    );
    for result in report.slot.assertions.iter().filter(|a| !a.passed) {
        out.push_str(&format!("\n- assertion {} failed: {}", result.kind, result.detail));
        let hint =
            step.assertions.iter().find(|a| a.kind() == result.kind).and_then(Assertion::recovery);
        if let Some(hint) = hint {
            out.push_str(&format!(" (hint: {hint})"));
        }
    }
    out
}
