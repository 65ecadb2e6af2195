use super::*;
use crate::{Registry, Value};

/// `[n, 2, 2]` f32 positions whose values are `base + 0..4n`.
fn positions(n: i64, base: f32) -> Tensor {
    let values: Vec<f32> = (0..n * 4).map(|i| base + i as f32).collect();
    Tensor::from_slice(&values, &[n, 2, 2]).unwrap()
}

/// K and V of `layer`'s view of an f32 cache.
fn kv(c: &mut KvCache, layer: usize) -> (Tensor, Tensor) {
    let [k, v]: [Tensor; 2] = c.view(layer).unwrap().try_into().unwrap();
    (k, v)
}

fn cache(layers: usize, capacity: usize) -> KvCache {
    KvCache::new(layers, 2, 2, capacity, DType::F32).unwrap()
}

#[test]
fn length_advances_per_layer_and_commits_when_all_appended() {
    let mut c = cache(2, 8);
    c.append(0, &[&positions(3, 0.0), &positions(3, 100.0)])
        .unwrap();
    assert_eq!(
        (c.len(), c.layer_len(0).unwrap(), c.layer_len(1).unwrap()),
        (0, 3, 0)
    );
    c.append(1, &[&positions(3, 10.0), &positions(3, 110.0)])
        .unwrap();
    assert_eq!(c.len(), 3);
    c.append(0, &[&positions(1, 50.0), &positions(1, 150.0)])
        .unwrap();
    let (k, v) = kv(&mut c, 0);
    assert_eq!(k.shape(), &[4, 2, 2]);
    let k = k.as_slice::<f32>().unwrap();
    assert_eq!(&k[..12], &(0..12).map(|i| i as f32).collect::<Vec<_>>()[..]);
    assert_eq!(&k[12..], &[50.0, 51.0, 52.0, 53.0]);
    assert_eq!(v.as_slice::<f32>().unwrap()[12], 150.0);
}

#[test]
fn views_share_the_cache_storage() {
    let mut c = cache(1, 4);
    c.append(0, &[&positions(2, 0.0), &positions(2, 0.0)])
        .unwrap();
    let (k1, _) = kv(&mut c, 0);
    c.append(0, &[&positions(1, 8.0), &positions(1, 8.0)])
        .unwrap();
    let (k2, _) = kv(&mut c, 0);
    assert_eq!(
        k1.data_ptr(),
        k2.data_ptr(),
        "appending past a view copies nothing"
    );
    assert_eq!(k1.shape(), &[2, 2, 2]);
    assert_eq!(k2.as_slice::<f32>().unwrap()[8..], [8.0, 9.0, 10.0, 11.0]);
    let mut k1 = k1;
    assert!(matches!(
        k1.as_mut_slice::<f32>(),
        Err(TensorError::Shared { .. })
    ));
}

#[test]
fn appending_past_capacity_names_capacity_and_requested_length() {
    let mut c = cache(1, 4);
    c.append(0, &[&positions(3, 0.0), &positions(3, 0.0)])
        .unwrap();
    let err = c
        .append(0, &[&positions(2, 0.0), &positions(2, 0.0)])
        .unwrap_err();
    assert_eq!(
        err,
        KvCacheError::Overflow {
            layer: 0,
            capacity: 4,
            requested: 5
        }
    );
    assert_eq!(
        err.to_string(),
        "KV cache overflow in layer 0: capacity is 4 positions, appending would need 5"
    );
    assert_eq!(
        c.layer_len(0).unwrap(),
        3,
        "a failed append changes nothing"
    );
}

#[test]
fn malformed_appends_are_rejected() {
    let mut c = cache(2, 4);
    let k = positions(1, 0.0);
    let err = c.append(2, &[&k, &k]).unwrap_err();
    assert_eq!(
        err,
        KvCacheError::LayerOutOfRange {
            layer: 2,
            layers: 2
        }
    );
    let wide = Tensor::zeros(DType::F32, &[1, 2, 3]).unwrap();
    let err = c.append(0, &[&wide, &k]).unwrap_err();
    assert_eq!(err.to_string(), "k has shape [1, 2, 3], expected [n, 2, 2]");
    let err = c.append(0, &[&k, &positions(2, 0.0)]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "v has shape [2, 2, 2], expected [n, 2, 2] with n = 1 as in k"
    );
    let halves = Tensor::zeros(DType::F16, &[1, 2, 2]).unwrap();
    let err = c.append(0, &[&k, &halves]).unwrap_err();
    assert_eq!(err.to_string(), "v has dtype f16, the cache stores f32");
    let strided = positions(2, 0.0).narrow(2, 0, 1).unwrap();
    let err = c.append(0, &[&strided, &strided]).unwrap_err();
    assert!(matches!(err, KvCacheError::Shape { .. }));
    let strided = Tensor::zeros(DType::F32, &[1, 2, 4])
        .unwrap()
        .narrow(2, 0, 2)
        .unwrap();
    let err = c.append(0, &[&strided, &strided]).unwrap_err();
    assert!(matches!(
        err,
        KvCacheError::Tensor(TensorError::NotContiguous { .. })
    ));
    assert_eq!(c.layer_len(0).unwrap(), 0);
}

#[test]
fn pop_and_clear_drop_positions() {
    let mut c = cache(2, 8);
    for layer in 0..2 {
        c.append(layer, &[&positions(5, 0.0), &positions(5, 0.0)])
            .unwrap();
    }
    c.append(0, &[&positions(1, 0.0), &positions(1, 0.0)])
        .unwrap();
    c.pop(2).unwrap();
    assert_eq!((c.len(), c.layer_len(0).unwrap()), (3, 3));
    assert_eq!(
        c.pop(4).unwrap_err(),
        KvCacheError::PopTooMany { n: 4, len: 3 }
    );
    c.clear();
    assert!(c.is_empty());
    assert_eq!(kv(&mut c, 1).0.shape(), &[0, 2, 2]);
}

#[test]
fn rewriting_popped_positions_never_changes_a_live_view() {
    let mut c = cache(1, 4);
    c.append(0, &[&positions(3, 0.0), &positions(3, 0.0)])
        .unwrap();
    let (old_k, _) = kv(&mut c, 0);
    c.pop(2).unwrap();
    c.append(0, &[&positions(1, 90.0), &positions(1, 90.0)])
        .unwrap();
    assert_eq!(old_k.as_slice::<f32>().unwrap()[4..8], [4.0, 5.0, 6.0, 7.0]);
    let (new_k, _) = kv(&mut c, 0);
    assert_ne!(
        new_k.data_ptr(),
        old_k.data_ptr(),
        "storage was copied on write"
    );
    assert_eq!(
        new_k.as_slice::<f32>().unwrap()[..8],
        [0.0, 1.0, 2.0, 3.0, 90.0, 91.0, 92.0, 93.0]
    );
    let ptr = new_k.data_ptr();
    drop((old_k, new_k));
    c.pop(1).unwrap();
    c.append(0, &[&positions(1, 7.0), &positions(1, 7.0)])
        .unwrap();
    assert_eq!(
        kv(&mut c, 0).0.data_ptr(),
        ptr,
        "no live view: written in place"
    );
}

#[test]
fn sub_byte_dtypes_are_refused() {
    let err = KvCache::new(1, 1, 2, 4, DType::U4).unwrap_err();
    assert_eq!(err.to_string(), "a KV cache cannot store u4 elements");
}

#[test]
fn builtins_drive_a_shared_cache() {
    let registry = Registry::with_builtins();
    let sizes = [2, 2, 2, 4].map(Value::Int);
    let create_args = [&sizes[..], &["f32".into()]].concat();
    let cache = registry.call("kv_cache.create", &create_args).unwrap();
    for layer in 0..2 {
        let args = [
            cache.clone(),
            Value::Int(layer),
            positions(2, 0.0).into(),
            positions(2, 1.0).into(),
        ];
        let out = registry.call("kv_cache.append", &args).unwrap();
        let (Value::Object(a), Value::Object(b)) = (&out, &cache) else {
            panic!("append returns the cache object");
        };
        assert!(a.ptr_eq(b));
    }
    let len = |registry: &Registry| {
        registry
            .call("kv_cache.len", std::slice::from_ref(&cache))
            .unwrap()
            .as_int()
    };
    assert_eq!(len(&registry), Some(2));
    let kv = registry
        .call("kv_cache.view", &[cache.clone(), Value::Int(1)])
        .unwrap();
    let fields = kv.as_tuple().unwrap();
    assert_eq!(
        fields[1].as_tensor().unwrap().as_slice::<f32>().unwrap()[0],
        1.0
    );
    registry
        .call("kv_cache.pop", &[cache.clone(), Value::Int(1)])
        .unwrap();
    assert_eq!(len(&registry), Some(1));
    registry
        .call("kv_cache.clear", std::slice::from_ref(&cache))
        .unwrap();
    assert_eq!(len(&registry), Some(0));
    let args = [
        cache.clone(),
        Value::Int(0),
        positions(5, 0.0).into(),
        positions(5, 0.0).into(),
    ];
    let err = registry.call("kv_cache.append", &args).unwrap_err();
    assert_eq!(
        err.to_string(),
        "`kv_cache.append` failed: KV cache overflow in layer 0: capacity is 4 positions, appending would need 5"
    );
}

#[test]
fn bytes_count_k_and_v_of_every_layer_at_capacity() {
    // 3 layers x (K + V) x 8 positions x 2 heads x 2 dims x 4 bytes.
    assert_eq!(cache(3, 8).bytes(), 3 * 2 * 8 * 2 * 2 * 4);
    let half = KvCache::new(1, 2, 4, 5, DType::F16).unwrap();
    assert_eq!(half.bytes(), 2 * 5 * 2 * 4 * 2);
}

/// `[n, 2, 3]` int8 codes `base + 0..6n` and `[n, 2]` scales `scale * (1 + 0..2n)`.
fn q8_positions(n: i64, base: i8, scale: f32) -> (Tensor, Tensor) {
    let codes: Vec<i8> = (0..n * 6).map(|i| base.wrapping_add(i as i8)).collect();
    let scales: Vec<f32> = (0..n * 2).map(|i| scale * (1 + i) as f32).collect();
    (
        Tensor::from_slice(&codes, &[n, 2, 3]).unwrap(),
        Tensor::from_slice(&scales, &[n, 2]).unwrap(),
    )
}

#[test]
fn an_int8_cache_stores_codes_and_scales_side_by_side() {
    let mut c = KvCache::new(2, 2, 3, 6, KvFormat::Q8).unwrap();
    assert_eq!(c.format(), KvFormat::Q8);
    // 2 layers x 6 positions x (K + V codes: 2 heads x 3 bytes, + 2 x 2 f32 scales).
    assert_eq!(c.bytes(), 2 * 6 * (2 * 2 * 3 + 2 * 2 * 4));
    for layer in 0..2 {
        let (k, ks) = q8_positions(2, 10, 0.5);
        let (v, vs) = q8_positions(2, -20, 0.25);
        c.append(layer, &[&k, &v, &ks, &vs]).unwrap();
    }
    let (k, ks) = q8_positions(1, 50, 2.0);
    c.append(0, &[&k, &k, &ks, &ks]).unwrap();
    assert_eq!((c.len(), c.layer_len(0).unwrap()), (2, 3));
    let views = c.view(0).unwrap();
    let shapes: Vec<&[i64]> = views.iter().map(Tensor::shape).collect();
    assert_eq!(shapes, [&[3, 2, 3][..], &[3, 2, 3], &[3, 2], &[3, 2]]);
    assert_eq!(views[0].as_slice::<i8>().unwrap()[11..13], [21, 50]);
    assert_eq!(
        views[3].as_slice::<f32>().unwrap()[..5],
        [0.25, 0.5, 0.75, 1.0, 2.0]
    );
    // Copy on write covers the scales too.
    c.pop(1).unwrap();
    let (k, ks) = q8_positions(1, 0, 9.0);
    c.append(0, &[&k, &k, &ks, &ks]).unwrap();
    assert_eq!(
        views[2].as_slice::<f32>().unwrap()[2],
        1.5,
        "old view unchanged"
    );
    assert_eq!(c.view(0).unwrap()[2].as_slice::<f32>().unwrap()[2], 9.0);
    c.clear();
    assert!(c.is_empty());
}

#[test]
fn an_int8_cache_checks_the_count_shape_and_dtype_of_what_it_appends() {
    let mut c = KvCache::new(1, 2, 3, 4, KvFormat::Q8).unwrap();
    let (k, ks) = q8_positions(1, 0, 1.0);
    let err = c.append(0, &[&k, &k]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "a q8 KV cache appends 4 tensors (k, v, k_scales, v_scales), got 2"
    );
    let err = c.append(0, &[&k, &k, &k, &ks]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "k_scales has dtype i8, the cache stores f32"
    );
    let (_, two) = q8_positions(2, 0, 1.0);
    let err = c.append(0, &[&k, &k, &ks, &two]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "v_scales has shape [2, 2], expected [n, 2] with n = 1 as in k"
    );
    let err = c.append(0, &[&ks, &k, &ks, &ks]).unwrap_err();
    assert_eq!(err.to_string(), "k has dtype f32, the cache stores i8");
    assert_eq!(c.layer_len(0).unwrap(), 0);
}

#[test]
fn builtins_create_append_to_and_view_an_int8_cache() {
    let registry = Registry::with_builtins();
    let sizes = [1, 2, 3, 4].map(Value::Int);
    let create_args = [&sizes[..], &["q8".into()]].concat();
    let cache = registry.call("kv_cache.create", &create_args).unwrap();
    let (k, ks) = q8_positions(2, 1, 0.5);
    let args = [cache.clone(), Value::Int(0)]
        .into_iter()
        .chain([k.clone(), k, ks.clone(), ks].map(Value::from))
        .collect::<Vec<_>>();
    registry.call("kv_cache.append_q8", &args).unwrap();
    let err = registry.call("kv_cache.append", &args[..4]).unwrap_err();
    assert!(err.to_string().contains("appends 4 tensors"), "{err}");
    let view = registry
        .call("kv_cache.view", &[cache.clone(), Value::Int(0)])
        .unwrap();
    let fields = view.as_tuple().unwrap();
    assert_eq!(fields.len(), 4);
    assert_eq!(fields[3].as_tensor().unwrap().shape(), &[2, 2]);
    let len = registry.call("kv_cache.len", &[cache]).unwrap();
    assert_eq!(len.as_int(), Some(2));
}
