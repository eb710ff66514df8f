//! Unit tests for prices, model-name matching and the cost ledger. Every expected figure is
//! worked out by hand in the comment above it.

use super::{CostLedger, Price, PriceTable, cache_saving_usd, cost_usd, undated};
use crate::types::TokenUsage;

fn usage(input: u64, output: u64, cache_read: u64, cache_write: u64) -> TokenUsage {
    TokenUsage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: cache_read,
        cache_write_tokens: cache_write,
    }
}

fn assert_usd(actual: f64, expected: f64) {
    assert!((actual - expected).abs() < 1e-12, "cost {actual} != {expected}");
}

fn price_of(table: &PriceTable, model: &str) -> Price {
    match table.lookup(model) {
        Some(found) => found.price,
        None => panic!("{model} has no price"),
    }
}

#[test]
fn sonnet_prices_each_kind_of_token_at_its_own_rate() {
    let table = PriceTable::built_in();
    // Sonnet 4.5: $3 input, $15 output, $0.30 cache read, $3.75 cache write per MTok.
    // 1000*3 + 500*15 + 2000*0.30 + 4000*3.75 = 3000 + 7500 + 600 + 15000 = 26100 -> $0.0261
    let cost = cost_usd(&price_of(&table, "claude-sonnet-4-5"), &usage(1000, 500, 2000, 4000));
    assert_usd(cost, 0.0261);
}

#[test]
fn opus_without_cache() {
    let table = PriceTable::built_in();
    // Opus 4.6: $5 input, $25 output.
    // 12345*5 + 6789*25 = 61725 + 169725 = 231450 -> $0.23145
    let cost = cost_usd(&price_of(&table, "claude-opus-4-6"), &usage(12_345, 6_789, 0, 0));
    assert_usd(cost, 0.23145);
}

#[test]
fn haiku_one_million_of_each() {
    let table = PriceTable::built_in();
    // Haiku 4.5, 1M tokens of each kind: $1 + $5 + $0.10 + $1.25 = $7.35
    let m = 1_000_000;
    let cost = cost_usd(&price_of(&table, "claude-haiku-4-5"), &usage(m, m, m, m));
    assert_usd(cost, 7.35);
}

#[test]
fn openai_cached_input_is_discounted() {
    let table = PriceTable::built_in();
    // gpt-4o-mini: $0.15 input, $0.60 output, $0.075 cached input.
    // 10000*0.15 + 2000*0.60 + 30000*0.075 = 1500 + 1200 + 2250 = 4950 -> $0.00495
    let cost = cost_usd(&price_of(&table, "gpt-4o-mini"), &usage(10_000, 2_000, 30_000, 0));
    assert_usd(cost, 0.00495);
}

#[test]
fn zero_usage_costs_nothing() {
    let table = PriceTable::built_in();
    assert_usd(cost_usd(&price_of(&table, "claude-opus-4-6"), &TokenUsage::default()), 0.0);
}

#[test]
fn dated_ids_are_priced_as_their_undated_model() {
    let table = PriceTable::built_in();
    let key = |model: &str| table.lookup(model).map(|found| found.key.to_owned());
    assert_eq!(key("claude-sonnet-4-5-20250929").as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(key("claude-haiku-4-5@20251001").as_deref(), Some("claude-haiku-4-5"));
    assert_eq!(key("claude-opus-4-6-latest").as_deref(), Some("claude-opus-4-6"));
    assert_eq!(key("gpt-4o-2024-08-06").as_deref(), Some("gpt-4o"));
    // The longer name is a model of its own, not gpt-4o with a suffix.
    assert_eq!(key("gpt-4o-mini-2024-07-18").as_deref(), Some("gpt-4o-mini"));
    assert_eq!(key("gpt-4o-mini").as_deref(), Some("gpt-4o-mini"));
}

#[test]
fn only_a_date_is_stripped() {
    let table = PriceTable::built_in();
    for model in [
        "gpt-4o-audio-preview",
        "claude-opus-4-6-fast",
        "claude-sonnet-4-5-2025",
        "claude-sonnet-4-5-2025092x",
        "claude-sonnet-4-520250929",
        "qwen2.5:7b",
        "",
    ] {
        assert_eq!(table.lookup(model), None, "{model}");
    }
    assert_eq!(undated("-20250929"), None);
    assert_eq!(undated("-latest"), None);
    assert_eq!(undated("ü-20250929"), Some("ü"));
    assert_eq!(undated("x@2024-08-06"), Some("x"));
    assert_eq!(undated("x-2024-0806"), None);
}

#[test]
fn unknown_models_cost_zero_and_say_so() {
    let table = PriceTable::built_in();
    let cost = table.cost("qwen2.5:7b", &usage(1000, 1000, 0, 0));
    assert!(!cost.priced);
    assert_usd(cost.usd, 0.0);
    let known = table.cost("claude-haiku-4-5", &usage(1000, 0, 0, 0));
    assert!(known.priced);
    // 1000 * $1 / 1M = $0.001
    assert_usd(known.usd, 0.001);
}

#[test]
fn an_override_replaces_the_built_in_price_for_dated_ids_too() {
    let mut table = PriceTable::built_in();
    table.set("claude-sonnet-4-5", Price::flat(1.0, 2.0));
    // Flat: cache tokens cost as input. 1000*1 + 1000*2 + 1000*1 + 1000*1 = 5000 -> $0.005
    let cost = table.cost("claude-sonnet-4-5-20250929", &usage(1000, 1000, 1000, 1000));
    assert!(cost.priced);
    assert_usd(cost.usd, 0.005);
    // An exact entry wins over the undated one.
    table.set("claude-sonnet-4-5-20250929", Price::FREE);
    assert_usd(table.cost("claude-sonnet-4-5-20250929", &usage(1000, 1000, 0, 0)).usd, 0.0);
    // A new model gets a price.
    table.set("qwen2.5:7b", Price::FREE);
    assert!(table.cost("qwen2.5:7b", &usage(5, 5, 0, 0)).priced);
}

#[test]
fn ledger_adds_up_per_call_and_per_role() {
    let ledger = CostLedger::new(PriceTable::built_in());
    // Opus: 1000*5 + 200*25 = 10000 -> $0.01
    let planner = ledger.record("planner", "claude-opus-4-6", &usage(1000, 200, 0, 0));
    assert_usd(planner.cost_usd, 0.01);
    // Sonnet: 2000*3 + 100*15 + 10000*0.30 = 6000 + 1500 + 3000 = 10500 -> $0.0105
    ledger.record("executor", "claude-sonnet-4-5-20250929", &usage(2000, 100, 10_000, 0));
    // Sonnet: 500*3 + 50*15 + 4000*3.75 = 1500 + 750 + 15000 = 17250 -> $0.01725
    ledger.record("executor", "claude-sonnet-4-5", &usage(500, 50, 0, 4000));
    let verifier = ledger.record("verifier", "qwen2.5:7b", &usage(300, 30, 0, 0));
    assert!(!verifier.priced);

    let summary = ledger.summary();
    let executor = &summary.roles["executor"];
    assert_eq!(executor.calls, 2);
    assert_eq!(executor.usage, usage(2500, 150, 10_000, 4000));
    // $0.0105 + $0.01725 = $0.02775
    assert_usd(executor.cost_usd, 0.02775);
    assert_eq!(summary.roles["verifier"].unpriced_calls, 1);
    assert_usd(summary.roles["verifier"].cost_usd, 0.0);
    assert_eq!(summary.total.calls, 4);
    // $0.01 + $0.02775 + $0 = $0.03775
    assert_usd(summary.total.cost_usd, 0.03775);
    assert_usd(ledger.total_usd(), 0.03775);
    assert_eq!(summary.unpriced_models.iter().collect::<Vec<_>>(), ["qwen2.5:7b"]);
    assert!(!summary.complete());

    let calls = ledger.calls();
    let roles: Vec<&str> = calls.iter().map(|c| c.role.as_str()).collect();
    assert_eq!(roles, ["planner", "executor", "executor", "verifier"]);
    assert_eq!(calls[1].model, "claude-sonnet-4-5-20250929");
}

#[test]
fn ledger_is_shared_between_threads() {
    let ledger = CostLedger::new(PriceTable::built_in());
    std::thread::scope(|scope| {
        for t in 0..8 {
            let ledger = &ledger;
            scope.spawn(move || {
                let role = if t % 2 == 0 { "executor" } else { "verifier" };
                for _ in 0..100 {
                    ledger.record(role, "claude-haiku-4-5", &usage(1000, 0, 0, 0));
                }
            });
        }
    });
    let summary = ledger.summary();
    assert_eq!(summary.total.calls, 800);
    assert_eq!(summary.roles["executor"].calls, 400);
    assert_eq!(summary.total.usage.input_tokens, 800_000);
    // 800 calls * 1000 tokens * $1 / 1M = $0.80
    assert!((summary.total.cost_usd - 0.80).abs() < 1e-9);
    assert!(summary.complete());
}

#[test]
fn the_cache_saving_counts_reads_as_saved_and_writes_as_spent() {
    let sonnet = price_of(&PriceTable::built_in(), "claude-sonnet-4-5");
    // Reads save $3 - $0.30 = $2.70/MTok; writes cost $3.75 - $3 = $0.75/MTok more.
    // 10000*2.70 - 2000*0.75 = 27000 - 1500 = 25500 -> $0.0255
    assert_usd(cache_saving_usd(&sonnet, &usage(500, 100, 10_000, 2_000)), 0.0255);
    // Writes nobody read back: a loss. 4000*0.75 = 3000 -> -$0.003
    assert_usd(cache_saving_usd(&sonnet, &usage(0, 0, 0, 4_000)), -0.003);
    // A price without a cache discount saves nothing.
    assert_usd(cache_saving_usd(&Price::flat(3.0, 15.0), &usage(0, 0, 9_000, 9_000)), 0.0);
}
