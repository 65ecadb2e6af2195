//! The scalar operands of an attention microkernel call and their reference semantics
//! (see [`MicrokernelKind::Attention`](super::MicrokernelKind::Attention)).

/// The scalar operands of one attention call, evaluated.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionScalars {
    /// Query (and output) rows attending to the same keys, `head_dim` elements apart.
    pub rows: i64,
    /// Key (and value) rows attended to.
    pub keys: i64,
    /// Elements from one key row to the next.
    pub kv_stride: i64,
    /// Elements of a query, key, value and output row.
    pub head_dim: i64,
    /// The factor applied to each dot product.
    pub scale: f64,
    /// Elements from one row's scale to the next, for quantized keys and values (`None`
    /// for float ones).
    pub scale_stride: Option<i64>,
}

impl AttentionScalars {
    /// The elements of `q`, `k`, `v` and `out` one call may touch.
    pub fn footprint(&self) -> [i64; 4] {
        let rows = if self.keys > 0 {
            (self.keys - 1) * self.kv_stride + self.head_dim
        } else {
            0
        };
        let queries = self.rows.max(0) * self.head_dim;
        [queries, rows, rows, queries]
    }

    /// The elements of `k_scales` (and of `v_scales`) one call on quantized keys and
    /// values may read.
    pub fn scales_footprint(&self) -> i64 {
        match self.scale_stride {
            Some(stride) if self.keys > 0 => (self.keys - 1) * stride + 1,
            _ => 0,
        }
    }

    /// The reference semantics (f64 arithmetic, two-pass softmax) on slices starting at
    /// each operand's offset; the slices must hold [`AttentionScalars::footprint`] elements
    /// (and the scales of quantized keys and values, given with a `scale_stride`,
    /// [`AttentionScalars::scales_footprint`]).
    pub fn reference(
        &self,
        q: &[f64],
        (k, v): (&[f64], &[f64]),
        scales: Option<(&[f64], &[f64])>,
        out: &mut [f64],
    ) {
        let (keys, stride, dim) = (
            self.keys.max(0) as usize,
            self.kv_stride as usize,
            self.head_dim as usize,
        );
        let scale_stride = self.scale_stride.unwrap_or(0) as usize;
        let row_scale =
            |j: usize, which: usize| scales.map_or(1.0, |s| [s.0, s.1][which][j * scale_stride]);
        for r in 0..self.rows.max(0) as usize {
            let q = &q[r * dim..(r + 1) * dim];
            let scores: Vec<f64> = (0..keys)
                .map(|j| {
                    let row = &k[j * stride..j * stride + dim];
                    let dot = q.iter().zip(row).map(|(a, b)| a * b).sum::<f64>();
                    self.scale * dot * row_scale(j, 0)
                })
                .collect();
            let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let total: f64 = weights.iter().sum();
            for (d, o) in out[r * dim..(r + 1) * dim].iter_mut().enumerate() {
                let sum: f64 = (0..keys)
                    .map(|j| weights[j] * v[j * stride + d] * row_scale(j, 1))
                    .sum();
                *o = if keys == 0 { 0.0 } else { sum / total };
            }
        }
    }
}
