//! Per-session accounting: the tokens each call used, as the provider reported them, and the
//! estimated cost from a price table.
//!
//! Prices are in US dollars per million tokens. The configuration's `prices` wins over the
//! built-in table, which holds a few well-known models at their published list prices and
//! goes stale: a model with no price is counted but not costed, and says so.

use serde::Serialize;

pub use crate::config::values::{Price, parse_prices as parse};

use super::types::{ModelId, Usage};
use crate::config::Config;

impl Price {
    pub fn cost(&self, usage: &Usage) -> f64 {
        let uncached = usage
            .input
            .saturating_sub(usage.cached_input)
            .saturating_sub(usage.cache_write);
        (uncached as f64 * self.input
            + usage.cached_input as f64 * self.cached_input
            + usage.cache_write as f64 * self.cache_write
            + usage.output as f64 * self.output)
            / 1_000_000.0
    }
}

/// List prices of a few models (USD per million tokens: input, cached input, output, cache
/// write), as published in 2025.
const BUILT_IN: &[(&str, [f64; 4])] = &[
    ("openai/gpt-4.1", [2.0, 0.5, 8.0, 2.0]),
    ("openai/gpt-4.1-mini", [0.4, 0.1, 1.6, 0.4]),
    ("openai/gpt-4.1-nano", [0.1, 0.025, 0.4, 0.1]),
    ("openai/gpt-4o", [2.5, 1.25, 10.0, 2.5]),
    ("openai/gpt-4o-mini", [0.15, 0.075, 0.6, 0.15]),
    ("anthropic/claude-sonnet-4-5", [3.0, 0.3, 15.0, 3.75]),
    ("anthropic/claude-haiku-4-5", [1.0, 0.1, 5.0, 1.25]),
    ("anthropic/claude-opus-4-1", [15.0, 1.5, 75.0, 18.75]),
];

#[derive(Clone, Debug, PartialEq)]
pub struct PriceTable {
    /// Configured entries first: the first match wins.
    entries: Vec<(String, Price)>,
}

impl PriceTable {
    pub fn built_in() -> Self {
        Self {
            entries: BUILT_IN
                .iter()
                .map(|(model, [input, cached_input, output, cache_write])| {
                    (
                        (*model).to_owned(),
                        Price {
                            input: *input,
                            cached_input: *cached_input,
                            output: *output,
                            cache_write: *cache_write,
                        },
                    )
                })
                .collect(),
        }
    }

    /// The configuration's `prices` (validated when read), then the built-in table.
    pub fn from_config(config: &Config) -> Self {
        let mut table = Self::built_in();
        if let Some(Ok(configured)) = config.get("prices").map(parse) {
            table.entries.splice(0..0, configured);
        }
        table
    }

    /// The price of `model`: an entry naming it exactly (`openai/gpt-4.1`), else the longest
    /// entry it extends (a dated snapshot `gpt-4.1-2025-04-14` costs what `gpt-4.1` costs).
    /// Configured entries are searched before built-in ones.
    pub fn lookup(&self, model: &ModelId) -> Option<Price> {
        let name = model.to_string();
        let mut best: Option<(usize, Price)> = None;
        for (entry, price) in &self.entries {
            if *entry == name {
                return Some(*price);
            }
            if name.starts_with(entry.as_str()) && best.is_none_or(|(len, _)| entry.len() > len) {
                best = Some((entry.len(), *price));
            }
        }
        best.map(|(_, price)| price)
    }
}

/// What a session has used so far.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SessionUsage {
    pub totals: Usage,
    pub calls: u32,
    /// Estimated from the prices of the calls' models.
    pub cost_usd: f64,
    /// Calls whose model has no price: their tokens are counted but not in `cost_usd`.
    pub unpriced_calls: u32,
}

impl SessionUsage {
    pub fn record(&mut self, model: &ModelId, usage: &Usage, prices: &PriceTable) {
        self.totals.add(usage);
        self.calls += 1;
        match prices.lookup(model) {
            Some(price) => self.cost_usd += price.cost(usage),
            None => self.unpriced_calls += 1,
        }
    }

    /// Share of input tokens read from the provider's cache.
    pub fn cache_hit_rate(&self) -> f64 {
        if self.totals.input == 0 {
            0.0
        } else {
            self.totals.cached_input as f64 / self.totals.input as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(text: &str) -> ModelId {
        ModelId::parse(text).unwrap()
    }

    #[test]
    fn cost_counts_cached_and_written_tokens_at_their_prices() {
        let price = Price {
            input: 3.0,
            cached_input: 0.3,
            output: 15.0,
            cache_write: 3.75,
        };
        let usage = Usage {
            input: 1_000_000,
            cached_input: 600_000,
            output: 100_000,
            cache_write: 200_000,
        };
        let expected = 0.2 * 3.0 + 0.6 * 0.3 + 0.2 * 3.75 + 0.1 * 15.0;
        assert!((price.cost(&usage) - expected).abs() < 1e-9);
    }

    #[test]
    fn configured_prices_win_and_snapshots_match_their_family() {
        let mut table = PriceTable::built_in();
        let configured = parse("openai/gpt-4.1=1/0.25/4; openai/qwen2.5-coder:7b=0/0/0").unwrap();
        table.entries.splice(0..0, configured);
        assert_eq!(table.lookup(&model("openai/gpt-4.1")).unwrap().input, 1.0);
        assert_eq!(
            table.lookup(&model("openai/gpt-4.1-mini")).unwrap().input,
            0.4
        );
        assert_eq!(
            table
                .lookup(&model("openai/gpt-4.1-mini-2025-04-14"))
                .unwrap()
                .input,
            0.4
        );
        assert_eq!(
            table
                .lookup(&model("openai/qwen2.5-coder:7b"))
                .unwrap()
                .output,
            0.0
        );
        assert_eq!(table.lookup(&model("openai/llama3")), None);
        assert_eq!(
            table
                .lookup(&model("anthropic/claude-sonnet-4-5"))
                .unwrap()
                .cache_write,
            3.75
        );
    }

    #[test]
    fn bad_price_entries_are_refused_with_the_reason() {
        assert!(
            parse("gpt-4.1=1/2/3")
                .unwrap_err()
                .contains("PROVIDER/MODEL")
        );
        assert!(
            parse("openai/x=1/2")
                .unwrap_err()
                .contains("INPUT/CACHED/OUTPUT")
        );
        assert!(
            parse("openai/x=1/-2/3")
                .unwrap_err()
                .contains("non-negative")
        );
        assert!(parse("openai/x").unwrap_err().contains("expected MODEL="));
        assert_eq!(
            parse("openai/x=1/0.5/2/1.25").unwrap()[0].1.cache_write,
            1.25
        );
    }

    #[test]
    fn a_session_adds_calls_and_counts_unpriced_ones() {
        let table = PriceTable::built_in();
        let mut session = SessionUsage::default();
        let usage = Usage {
            input: 1000,
            cached_input: 800,
            output: 50,
            cache_write: 0,
        };
        session.record(&model("openai/gpt-4.1-mini"), &usage, &table);
        session.record(&model("openai/local-model"), &usage, &table);
        assert_eq!(session.calls, 2);
        assert_eq!(session.unpriced_calls, 1);
        assert_eq!(session.totals.input, 2000);
        assert!((session.cache_hit_rate() - 0.8).abs() < 1e-9);
        assert!(session.cost_usd > 0.0);
    }
}
