//! What model calls cost: a price per model (USD per million tokens, for plain input, output,
//! cache reads and cache writes), a table of them with built-in defaults that `pev.toml` can
//! override, and a ledger that adds up usage and dollars per call and per role.
//!
//! A model the table does not know costs $0 and is flagged as unpriced, never guessed: a budget
//! that silently counts an unknown model as some other model's price is worse than one that says
//! it cannot count.
//!
//! [`TokenUsage::input_tokens`] is the input that was neither read from nor written to a prompt
//! cache (Anthropic's `input_tokens`; the OpenAI client subtracts `cached_tokens` from
//! `prompt_tokens`), so the four counts are disjoint and each is priced once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};

use serde::Serialize;

use crate::types::TokenUsage;

/// What a model's tokens cost, in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Price {
    /// Input that was not read from or written to a prompt cache.
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    /// Input read from the prompt cache.
    pub cache_read_per_mtok: f64,
    /// Input written to the prompt cache.
    pub cache_write_per_mtok: f64,
}

impl Price {
    /// A price with no cache discount or surcharge: cache reads and writes cost as plain input.
    pub const fn flat(input_per_mtok: f64, output_per_mtok: f64) -> Self {
        Self {
            input_per_mtok,
            output_per_mtok,
            cache_read_per_mtok: input_per_mtok,
            cache_write_per_mtok: input_per_mtok,
        }
    }

    /// A model that costs nothing (a local server).
    pub const FREE: Self = Self::flat(0.0, 0.0);
}

const fn price(input: f64, output: f64, cache_read: f64, cache_write: f64) -> Price {
    Price {
        input_per_mtok: input,
        output_per_mtok: output,
        cache_read_per_mtok: cache_read,
        cache_write_per_mtok: cache_write,
    }
}

/// The built-in prices, looked up on 2026-11-21. Models whose price could not be found in a
/// published table are left out rather than guessed.
///
/// Anthropic: <https://platform.claude.com/docs/en/about-claude/pricing> ("Model pricing"). Cache
/// writes are the 5-minute rate: the default TTL, and the one `cache_control: ephemeral` asks for.
///
/// OpenAI: <https://platform.openai.com/docs/pricing> (input, cached input, output; figures as
/// quoted from that page by several price trackers, since the page itself was not in reach).
/// OpenAI does not bill cache writes separately, so they cost as plain input.
const BUILT_IN: &[(&str, Price)] = &[
    ("claude-opus-4-6", price(5.0, 25.0, 0.50, 6.25)),
    ("claude-opus-4-5", price(5.0, 25.0, 0.50, 6.25)),
    ("claude-sonnet-4-6", price(3.0, 15.0, 0.30, 3.75)),
    ("claude-sonnet-4-5", price(3.0, 15.0, 0.30, 3.75)),
    ("claude-haiku-4-5", price(1.0, 5.0, 0.10, 1.25)),
    ("gpt-4o", price(2.50, 10.0, 1.25, 2.50)),
    ("gpt-4o-mini", price(0.15, 0.60, 0.075, 0.15)),
    ("gpt-4.1", price(2.0, 8.0, 0.50, 2.0)),
    ("gpt-4.1-mini", price(0.40, 1.60, 0.10, 0.40)),
];

/// The cost of `usage` at `price`, in USD.
pub fn cost_usd(price: &Price, usage: &TokenUsage) -> f64 {
    // u64 -> f64 loses precision only past 2^53 tokens, far beyond any bill.
    let sum = usage.input_tokens as f64 * price.input_per_mtok
        + usage.output_tokens as f64 * price.output_per_mtok
        + usage.cache_read_tokens as f64 * price.cache_read_per_mtok
        + usage.cache_write_tokens as f64 * price.cache_write_per_mtok;
    sum / 1_000_000.0
}

/// What a prompt cache saved on `usage` against paying every prompt token at the plain input
/// price: reads cost less than input, writes more, so this is negative when a call wrote to the
/// cache and nothing read it back.
pub fn cache_saving_usd(price: &Price, usage: &TokenUsage) -> f64 {
    let read = usage.cache_read_tokens as f64 * (price.input_per_mtok - price.cache_read_per_mtok);
    let write =
        usage.cache_write_tokens as f64 * (price.input_per_mtok - price.cache_write_per_mtok);
    (read + write) / 1_000_000.0
}

/// The price of one model, as a table found it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PriceMatch<'a> {
    /// The table's key that matched (the model itself, or its undated name).
    pub key: &'a str,
    pub price: Price,
}

/// Prices by model name: the built-in ones, plus overrides.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceTable {
    entries: BTreeMap<String, Price>,
}

impl Default for PriceTable {
    fn default() -> Self {
        Self::built_in()
    }
}

impl PriceTable {
    /// The built-in prices.
    pub fn built_in() -> Self {
        let entries = BUILT_IN.iter().map(|(model, price)| ((*model).to_owned(), *price)).collect();
        Self { entries }
    }

    /// A table with no prices at all.
    pub fn empty() -> Self {
        Self { entries: BTreeMap::new() }
    }

    /// Sets (or overrides) the price of `model`.
    pub fn set(&mut self, model: impl Into<String>, price: Price) {
        self.entries.insert(model.into(), price);
    }

    /// Every model and its price, by name.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &Price)> {
        self.entries.iter().map(|(model, price)| (model.as_str(), price))
    }

    /// The price of `model`: its own entry, else the entry of its undated name
    /// (`claude-sonnet-4-5-20250929` and `gpt-4o-2024-08-06` are priced as `claude-sonnet-4-5`
    /// and `gpt-4o`). Only a date (or `latest`) is stripped, so `gpt-4o-audio-preview` is not
    /// priced as `gpt-4o`.
    pub fn lookup(&self, model: &str) -> Option<PriceMatch<'_>> {
        if let Some((key, price)) = self.entries.get_key_value(model) {
            return Some(PriceMatch { key, price: *price });
        }
        let base = undated(model)?;
        let (key, price) = self.entries.get_key_value(base)?;
        Some(PriceMatch { key, price: *price })
    }

    /// What `usage` of `model` costs; $0, flagged unpriced, when the model is not in the table.
    pub fn cost(&self, model: &str, usage: &TokenUsage) -> Cost {
        match self.lookup(model) {
            Some(found) => Cost {
                usd: cost_usd(&found.price, usage),
                saved_usd: cache_saving_usd(&found.price, usage),
                priced: true,
            },
            None => Cost { usd: 0.0, saved_usd: 0.0, priced: false },
        }
    }
}

/// `model` without a trailing date (`-20250929`, `-2024-08-06`, `@20250929`) or `-latest`.
fn undated(model: &str) -> Option<&str> {
    if let Some(base) = model.strip_suffix("-latest") {
        return (!base.is_empty()).then_some(base);
    }
    let bytes = model.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        bytes.get(range).is_some_and(|part| part.iter().all(u8::is_ascii_digit))
    };
    let len = bytes.len();
    // `YYYYMMDD` or `YYYY-MM-DD`, after a `-` or `@`. Every byte checked is ASCII, so the cut
    // is on a char boundary (and `get` would say so if it were not).
    let date_len = if len >= 9 && digits(len - 8..len) {
        8
    } else if len >= 11
        && digits(len - 10..len - 6)
        && bytes.get(len - 6) == Some(&b'-')
        && digits(len - 5..len - 3)
        && bytes.get(len - 3) == Some(&b'-')
        && digits(len - 2..len)
    {
        10
    } else {
        return None;
    };
    let cut = len - date_len - 1;
    if !matches!(bytes.get(cut), Some(b'-' | b'@')) || cut == 0 {
        return None;
    }
    model.get(..cut)
}

/// What a call cost.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Cost {
    pub usd: f64,
    /// What the prompt cache saved ([`cache_saving_usd`]).
    pub saved_usd: f64,
    /// False when the model has no price (the cost is then counted as $0).
    pub priced: bool,
}

/// One model call, as the ledger recorded it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallCost {
    pub role: String,
    pub model: String,
    pub usage: TokenUsage,
    pub cost_usd: f64,
    /// What the prompt cache saved on this call.
    pub saved_usd: f64,
    pub priced: bool,
}

/// The totals of one role (or of all roles).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RoleCost {
    pub calls: u64,
    pub usage: TokenUsage,
    pub cost_usd: f64,
    /// Calls whose model has no price (counted as $0).
    pub unpriced_calls: u64,
}

impl RoleCost {
    fn add(&mut self, call: &CallCost) {
        self.calls = self.calls.saturating_add(1);
        self.usage.add(&call.usage);
        self.cost_usd += call.cost_usd;
        if !call.priced {
            self.unpriced_calls = self.unpriced_calls.saturating_add(1);
        }
    }
}

/// The ledger's totals: per role, overall, and the models that have no price.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CostSummary {
    pub roles: BTreeMap<String, RoleCost>,
    pub total: RoleCost,
    pub unpriced_models: BTreeSet<String>,
}

impl CostSummary {
    /// Whether every call was priced (the total is then the whole bill).
    pub fn complete(&self) -> bool {
        self.unpriced_models.is_empty()
    }
}

#[derive(Debug, Default)]
struct Ledger {
    calls: Vec<CallCost>,
    summary: CostSummary,
}

/// Usage and cost of every model call of a run, per call and per role. Shared between tasks
/// (`&CostLedger` is enough to record).
#[derive(Debug)]
pub struct CostLedger {
    prices: PriceTable,
    inner: Mutex<Ledger>,
}

impl CostLedger {
    pub fn new(prices: PriceTable) -> Self {
        Self { prices, inner: Mutex::new(Ledger::default()) }
    }

    /// The prices this ledger counts with.
    pub fn prices(&self) -> &PriceTable {
        &self.prices
    }

    /// Records one call of `model` by `role` and returns what it cost.
    pub fn record(&self, role: &str, model: &str, usage: &TokenUsage) -> CallCost {
        let cost = self.prices.cost(model, usage);
        let call = CallCost {
            role: role.to_owned(),
            model: model.to_owned(),
            usage: *usage,
            cost_usd: cost.usd,
            saved_usd: cost.saved_usd,
            priced: cost.priced,
        };
        let mut ledger = self.lock();
        ledger.summary.roles.entry(call.role.clone()).or_default().add(&call);
        ledger.summary.total.add(&call);
        if !call.priced {
            ledger.summary.unpriced_models.insert(call.model.clone());
        }
        ledger.calls.push(call.clone());
        call
    }

    /// Every call recorded so far, in order.
    pub fn calls(&self) -> Vec<CallCost> {
        self.lock().calls.clone()
    }

    /// The totals so far.
    pub fn summary(&self) -> CostSummary {
        self.lock().summary.clone()
    }

    /// The total cost so far, in USD.
    pub fn total_usd(&self) -> f64 {
        self.lock().summary.total.cost_usd
    }

    fn lock(&self) -> MutexGuard<'_, Ledger> {
        // A panic while holding the lock cannot leave the ledger half-updated in a way that
        // matters more than losing it would, so a poisoned lock is used as is.
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
#[path = "cost_tests.rs"]
mod tests;
