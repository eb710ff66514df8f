//! A role's model client, stacked in one place. Around the client a role talks to (a provider
//! with its retries, or a recording in `pev replay`) a run puts, innermost first: `Logged` (every
//! call journaled), `Budgeted` (the run's ceiling and ledger) and, in a resumed run, `Resuming`
//! (the interrupted attempts' calls answered from the journal while they match; outside the
//! budget, because what the journal answers was paid for by the session that asked it).
//! `pev agent`, `pev resume` and `pev replay` build their roles with a [`Stack`], and so do the
//! child runs of delegated steps, whose stack adds only their own budget slice around the
//! parent's already journaled clients.

use std::sync::Arc;

use pev_providers::ModelClient;
use pev_providers::cost::PriceTable;

use super::budget::{BudgetState, BudgetedClient};
use super::call_log::{CallLog, LoggedClient};
use super::replay::{Recording, ResumingClient};

/// One role's client and model.
#[derive(Clone)]
pub struct RoleClient {
    pub client: Arc<dyn ModelClient>,
    pub model: String,
}

/// The clients children are run with: the parent's, each already paying from the parent's
/// budget and journaled through its call log.
#[derive(Clone)]
pub struct Roles {
    pub planner: RoleClient,
    pub executor: RoleClient,
    pub verifier: Option<RoleClient>,
}

/// The layers a run puts around each role's own client.
#[derive(Clone)]
pub struct Stack {
    pub prices: PriceTable,
    /// The budget every role of the run pays from.
    pub state: Arc<BudgetState>,
    /// Where each call is journaled; `None` when the inner client already journals (a child
    /// run's roles are its parent's).
    pub calls: Option<Arc<CallLog>>,
    /// A resumed run's recording: the interrupted attempts' calls are answered from it.
    pub resume: Option<Arc<Recording>>,
}

impl Stack {
    /// `inner` with this run's layers, for the role called `role` (`planner`, `executor`,
    /// `verifier`): `Resuming?(Budgeted(Logged?(inner)))`.
    pub fn client(&self, role: &str, inner: Arc<dyn ModelClient>) -> Arc<dyn ModelClient> {
        let logged: Arc<dyn ModelClient> = match &self.calls {
            Some(calls) => Arc::new(LoggedClient::new(inner, role, Arc::clone(calls))),
            None => inner,
        };
        let paid: Arc<dyn ModelClient> = Arc::new(BudgetedClient::new(
            logged,
            role,
            self.prices.clone(),
            Arc::clone(&self.state),
        ));
        match &self.resume {
            Some(recording) => Arc::new(ResumingClient::new(role, Arc::clone(recording), paid)),
            None => paid,
        }
    }

    /// [`Stack::client`] with the role's model name.
    pub fn role(&self, role: &str, inner: Arc<dyn ModelClient>, model: String) -> RoleClient {
        RoleClient { client: self.client(role, inner), model }
    }

    /// This stack without the resumed run's recording (a role whose calls are never answered
    /// from the journal).
    pub fn live(&self) -> Self {
        Self { resume: None, ..self.clone() }
    }
}

#[cfg(test)]
mod tests {
    use pev_providers::script::{ScriptTurn, ScriptedClient};
    use pev_providers::{ChatRequest, Message};

    use super::*;
    use crate::agent::budget::Budget;

    fn scripted(n: usize) -> Arc<dyn ModelClient> {
        Arc::new(ScriptedClient::from_turns("t", (0..n).map(|_| ScriptTurn::text("ok")).collect()))
    }

    #[tokio::test]
    async fn every_layer_the_stack_names_is_there_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let (db, store) = crate::agent::test_clients::journal_with_run(dir.path());
        let prices = PriceTable::built_in();
        let state = Arc::new(BudgetState::new(Budget::default(), prices.clone()));
        let calls = CallLog::priced(prices.clone());
        calls.attach(&db, "r1").unwrap();
        let request = ChatRequest::new("m", vec![Message::user("hi")]);

        let stack = Stack {
            prices,
            state: Arc::clone(&state),
            calls: Some(Arc::clone(&calls)),
            resume: None,
        };
        let role = stack.role("executor", scripted(1), "m".to_owned());
        role.client.chat(&request).await.unwrap();
        assert_eq!(state.snapshot().llm_calls, 1, "the budget layer counted the call");
        assert_eq!(store.model_calls("r1").unwrap().len(), 1, "the log layer journaled it");

        // A child run's stack: its own budget around the parent's (already journaled) client.
        let child_state = Arc::new(BudgetState::new(Budget::default(), stack.prices.clone()));
        let child = Stack { state: Arc::clone(&child_state), calls: None, ..stack.live() };
        child.client("executor", scripted(1)).chat(&request).await.unwrap();
        assert_eq!(child_state.snapshot().llm_calls, 1, "the child's slice paid");
        assert_eq!(state.snapshot().llm_calls, 1, "the parent's budget is not this stack's");
        assert_eq!(store.model_calls("r1").unwrap().len(), 1, "nothing journaled twice");
        calls.close();
    }
}
