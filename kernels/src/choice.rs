//! The choice of the next token from a row of logits: greedily (the largest), or by sampling
//! at a temperature (the softmax's weights, then a draw along their running sum).
//!
//! Each runs once per generated token over the whole vocabulary (49152 logits for SmolLM2),
//! which is why it is here, optimised in every build and on the CPU's widest vectors: done
//! plainly, in `f64` with the library's `exp`, sampling one token cost about a third of a
//! millisecond, a tenth of what a speculative pass spends per token. The sums are kept in
//! `f64` partial sums combined in a fixed order, so a seeded draw picks the same token on
//! every vector width.

/// `f64` partial sums per reduction: one 512-bit vector of them.
const LANES: usize = 8;

/// The index of the largest value, the first one on ties (greedy decoding's choice).
pub fn argmax(values: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &value) in values.iter().enumerate() {
        if value > values[best] {
            best = i;
        }
    }
    best as u32
}

/// Σ `values` in `f64`: `LANES` partial sums, then combined in order.
#[inline(always)]
fn sum(values: &[f32]) -> f64 {
    let mut lanes = [0f64; LANES];
    let chunks = values.chunks_exact(LANES);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (lane, &value) in lanes.iter_mut().zip(chunk) {
            *lane += f64::from(value);
        }
    }
    lanes.iter().sum::<f64>() + rest.iter().map(|&value| f64::from(value)).sum::<f64>()
}

crate::vectorised! {
    /// The softmax's weights at `temperature`, unnormalised: `out[i] = e^((logits[i] - max) /
    /// temperature)`, each in `(0, 1]`, and their sum. Not finite when a logit is not.
    pub fn softmax_weights(logits: &[f32], temperature: f32, out: &mut [f32]) -> f64 {
        assert_eq!(logits.len(), out.len(), "one weight per logit");
        // The maximum in fixed lanes (a plain fold over `f32::max` stays scalar).
        let mut lanes = [f32::NEG_INFINITY; 16];
        let chunks = logits.chunks_exact(lanes.len());
        let rest = chunks.remainder();
        for chunk in chunks {
            for (lane, &logit) in lanes.iter_mut().zip(chunk) {
                *lane = if logit > *lane { logit } else { *lane };
            }
        }
        let max = lanes
            .iter()
            .chain(rest)
            .fold(f32::NEG_INFINITY, |max, &logit| if logit > max { logit } else { max });
        let scale = 1.0 / temperature;
        for (weight, &logit) in out.iter_mut().zip(logits) {
            *weight = crate::ops::exp((logit - max) * scale);
        }
        sum(out)
    }
}

crate::vectorised! {
    /// The index at which the running sum of `weights` first exceeds `target` (a uniform
    /// draw from `[0, Σ weights)`), never one whose weight is zero (a token taken out of the
    /// draw). When rounding leaves the target past the end, the last index with a weight;
    /// `None` when no weight is above zero. Blocks the target lies beyond are skipped by
    /// their sums, so the scan is mostly vector additions.
    pub fn draw(weights: &[f32], target: f64) -> Option<usize> {
        const BLOCK: usize = 64;
        let mut target = target;
        let mut last = None;
        for (number, block) in weights.chunks(BLOCK).enumerate() {
            let start = number * BLOCK;
            let total = sum(block);
            if target >= total {
                target -= total;
                if let Some(i) = block.iter().rposition(|&weight| weight != 0.0) {
                    last = Some(start + i);
                }
                continue;
            }
            for (i, &weight) in block.iter().enumerate() {
                if weight == 0.0 {
                    continue;
                }
                last = Some(start + i);
                if target < f64::from(weight) {
                    return last;
                }
                target -= f64::from(weight);
            }
        }
        last
    }
}

/// The plain computation the kernels replaced: the weights in `f64` with the library's `exp`,
/// then a scalar scan of their running sum to `uniform` (in `[0, 1)`) of the total. Kept as
/// the reference the kernels are tested against and the peer `cargo xtask bench local`
/// measures them against, built as optimised as they are.
pub fn plain_sample(logits: &[f32], temperature: f32, uniform: f64, weights: &mut Vec<f64>) -> u32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    weights.clear();
    weights.extend(
        logits
            .iter()
            .map(|&logit| ((f64::from(logit) - f64::from(max)) / f64::from(temperature)).exp()),
    );
    let mut target = uniform * weights.iter().sum::<f64>();
    for (i, &weight) in weights.iter().enumerate() {
        if target < weight {
            return i as u32;
        }
        target -= weight;
    }
    logits.len().saturating_sub(1) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_takes_the_first_of_equal_largest_values() {
        assert_eq!(argmax(&[1.0, 3.0, 2.0, 3.0]), 1);
        assert_eq!(argmax(&[-5.0]), 0);
        assert_eq!(argmax(&[0.0, f32::NAN, 1.0]), 2);
    }

    #[test]
    fn softmax_weights_match_the_f64_formula() {
        // Long enough for whole lanes and a remainder; the largest logit in the remainder.
        let logits: Vec<f32> = (0..1000)
            .map(|i| ((i * 37) % 101) as f32 * 0.13 - 6.0)
            .collect();
        let mut logits_with_max_at_end = logits.clone();
        logits_with_max_at_end.push(20.0);
        for (logits, temperature) in [(&logits, 0.7f32), (&logits_with_max_at_end, 1.3)] {
            let mut weights = vec![0.0; logits.len()];
            let total = softmax_weights(logits, temperature, &mut weights);
            let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut want_total = 0.0;
            for (&logit, &weight) in logits.iter().zip(&weights) {
                let want = ((f64::from(logit) - f64::from(max)) / f64::from(temperature)).exp();
                // `(logit - max) / temperature` rounded to `f32` is off by up to a few 10⁻⁶
                // when it is large; `e^x` carries that over as a relative error.
                assert!(
                    (f64::from(weight) - want).abs() <= 1e-5 * want,
                    "{weight} vs {want}"
                );
                want_total += want;
            }
            assert!((total - want_total).abs() <= 1e-6 * want_total);
        }
    }

    #[test]
    fn a_draw_lands_where_the_running_sum_passes_the_target() {
        // Three blocks and a bit: weights 1, 2, 3, … with zeros in between.
        let weights: Vec<f32> = (0..200)
            .map(|i| if i % 3 == 0 { 0.0 } else { i as f32 })
            .collect();
        let mut running = 0.0;
        for (i, &weight) in weights.iter().enumerate() {
            if weight == 0.0 {
                continue;
            }
            // The start of each weight's interval, its middle and just before its end.
            for target in [
                running,
                running + f64::from(weight) / 2.0,
                running + f64::from(weight) - 0.01,
            ] {
                assert_eq!(draw(&weights, target), Some(i), "target {target}");
            }
            running += f64::from(weight);
        }
        // Past the end: the last weighted index; nothing weighted: none.
        assert_eq!(draw(&weights, running + 5.0), Some(199));
        assert_eq!(draw(&[0.0; 70], 0.0), None);
        assert_eq!(draw(&[], 0.0), None);
    }

    #[test]
    fn the_kernels_draw_what_the_plain_computation_draws() {
        let logits: Vec<f32> = (0..5000)
            .map(|i| ((i * 7919) % 2003) as f32 / 100.0 - 10.0)
            .collect();
        let (mut weights, mut plain_weights) = (vec![0.0; logits.len()], Vec::new());
        let total = softmax_weights(&logits, 0.7, &mut weights);
        let mut differ = 0;
        for step in 0..2000 {
            let uniform = (f64::from(step) * 0.618_034) % 1.0;
            let ours = draw(&weights, uniform * total);
            let plain = plain_sample(&logits, 0.7, uniform, &mut plain_weights);
            // The two round differently, so a target within rounding of a boundary may land
            // on the neighbour; never farther.
            match ours {
                Some(i) if i as u32 == plain => {}
                Some(i) if i.abs_diff(plain as usize) == 1 => differ += 1,
                other => panic!("uniform {uniform}: {other:?} against {plain}"),
            }
        }
        assert!(differ <= 2, "{differ} of 2000 draws landed on a neighbour");
    }
}
