//! Paged caches against unpaged ones: same contents through appends, pops, shared
//! prefixes, copies on write, a full pool and live views.

use super::*;

/// Heads and head size making a 4 KiB f32 position, so pages are 16 positions.
const HEADS: i64 = 4;
const DIM: i64 = 256;

/// `n` positions of K (or V) whose values start at `base`.
fn rows(n: usize, base: f32) -> Tensor {
    let values: Vec<f32> = (0..n as i64 * HEADS * DIM)
        .map(|i| base + i as f32 * 1e-3)
        .collect();
    Tensor::from_slice(&values, &[n as i64, HEADS, DIM]).unwrap()
}

fn unpaged(layers: usize, format: impl Into<KvFormat>) -> KvCache {
    KvCache::new(layers, HEADS as usize, DIM as usize, 64, format).unwrap()
}

fn pool(like: &KvCache, pages: usize) -> Arc<PagePool> {
    PagePool::new(like, PoolSize::Pages(pages)).unwrap()
}

/// Appends `n` positions starting at value `base` to every layer.
fn append(c: &mut KvCache, n: usize, base: f32) -> Result<(), KvCacheError> {
    for layer in 0..c.num_layers() {
        let (k, v) = (rows(n, base + layer as f32), rows(n, -base - layer as f32));
        c.append(layer, &[&k, &v])?;
    }
    Ok(())
}

/// Every layer's streams, as bytes.
fn contents(c: &mut KvCache) -> Vec<Vec<u8>> {
    (0..c.num_layers())
        .flat_map(|layer| c.view(layer).unwrap())
        .map(|t| t.as_bytes().unwrap().to_vec())
        .collect()
}

#[test]
fn a_paged_cache_holds_what_an_unpaged_one_does() {
    for format in [KvFormat::Plain(DType::F32), KvFormat::Plain(DType::F16)] {
        let mut plain = unpaged(2, format);
        let pool = pool(&plain, 8);
        assert_eq!(pool.page_positions(), 16);
        let mut paged = pool.new_cache().unwrap();
        for (n, base) in [(5, 0.0), (20, 1.0), (1, 2.0), (14, 3.0)] {
            append(&mut plain, n, base).unwrap();
            append(&mut paged, n, base).unwrap();
        }
        plain.pop(7).unwrap();
        paged.pop(7).unwrap();
        append(&mut plain, 9, 4.0).unwrap();
        append(&mut paged, 9, 4.0).unwrap();
        assert_eq!(paged.len(), 42);
        assert_eq!(contents(&mut paged), contents(&mut plain), "{format}");
        assert_eq!(pool.stats().used, 3, "42 positions in pages of 16");
        drop(paged);
        assert_eq!(pool.stats().used, 0, "a dropped cache gives its pages back");
    }
}

#[test]
fn a_shared_prefix_maps_the_same_pages_and_each_copy_writes_its_own() {
    let like = unpaged(2, DType::F32);
    let pool = pool(&like, 8);
    let mut first = pool.new_cache().unwrap();
    append(&mut first, 40, 0.0).unwrap();
    let before = contents(&mut first);
    let mut second = pool.new_cache().unwrap();
    second.copy_prefix(&first, 37).unwrap();
    let stats = pool.stats();
    assert_eq!((stats.used, stats.shared), (3, 3), "no page copied");
    append(&mut second, 2, 9.0).unwrap();
    assert_eq!(pool.stats().shared, 2, "the written page was copied first");
    assert_eq!(contents(&mut first), before, "the source is unchanged");
    let mut expected = unpaged(2, DType::F32);
    append(&mut expected, 40, 0.0).unwrap();
    expected.pop(3).unwrap();
    append(&mut expected, 2, 9.0).unwrap();
    assert_eq!(contents(&mut second), contents(&mut expected));
    // The source writing into the shared page copies it too.
    append(&mut first, 1, 5.0).unwrap();
    assert_eq!(contents(&mut second), contents(&mut expected));
    second.clear();
    first.clear();
    assert_eq!(pool.stats().used, 0);
}

#[test]
fn a_full_pool_is_an_error_that_changes_nothing() {
    let like = unpaged(1, DType::F32);
    let pool = pool(&like, 2);
    let mut a = pool.new_cache().unwrap();
    let mut b = pool.new_cache().unwrap();
    append(&mut a, 16, 0.0).unwrap();
    append(&mut b, 10, 1.0).unwrap();
    let held = contents(&mut b);
    assert_eq!(
        append(&mut b, 10, 2.0),
        Err(KvCacheError::PoolFull { pages: 2 })
    );
    assert_eq!((b.len(), contents(&mut b)), (10, held));
    a.clear();
    append(&mut b, 10, 2.0).unwrap();
    assert_eq!(b.len(), 20);
}

#[test]
fn a_live_view_keeps_its_contents_when_popped_positions_are_rewritten() {
    let like = unpaged(1, DType::F32);
    let pool = pool(&like, 8);
    let mut c = pool.new_cache().unwrap();
    append(&mut c, 20, 0.0).unwrap();
    let view = c.view(0).unwrap();
    let seen = view[0].as_bytes().unwrap().to_vec();
    c.pop(10).unwrap();
    append(&mut c, 10, 7.0).unwrap();
    assert_eq!(view[0].as_bytes().unwrap(), seen.as_slice());
    assert_ne!(contents(&mut c)[0], seen);
    drop(view);
    c.clear();
    assert_eq!(
        pool.stats().used,
        0,
        "the old range's pages went back with the view"
    );
}

#[test]
fn an_int8_cache_pages_its_scales_too() {
    let mut plain = unpaged(2, KvFormat::Q8);
    let pool = pool(&plain, 4);
    let mut paged = pool.new_cache().unwrap();
    for c in [&mut plain, &mut paged] {
        for layer in 0..2 {
            let codes = Tensor::from_slice(
                &(0..3 * HEADS * DIM)
                    .map(|i| (i % 127) as i8)
                    .collect::<Vec<_>>(),
                &[3, HEADS, DIM],
            )
            .unwrap();
            let scales = Tensor::from_slice(&[0.5f32; 3 * HEADS as usize], &[3, HEADS]).unwrap();
            c.append(layer, &[&codes, &codes, &scales, &scales])
                .unwrap();
        }
    }
    for layer in 0..2 {
        let (a, b) = (plain.view(layer).unwrap(), paged.view(layer).unwrap());
        for (a, b) in a.iter().zip(&b) {
            assert_eq!(a.as_bytes().unwrap(), b.as_bytes().unwrap());
        }
    }
}

#[test]
fn pages_grow_rather_than_need_more_mappings_than_the_os_allows() {
    let Some(limit) = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|t| t.trim().parse::<usize>().ok())
    else {
        return;
    };
    let like = unpaged(2, DType::F32);
    // Per page: 2 layers x 2 streams mapped, and the gap after each.
    let mappings = |pool: &PagePool| pool.pages() * 2 * 2 * 2;
    let contexts = limit / 16;
    let pool = PagePool::new(&like, PoolSize::Contexts(contexts)).unwrap();
    assert!(mappings(&pool) <= limit / 2, "{pool:?}");
    assert!(
        pool.page_positions() > 16,
        "16-position pages would need {}",
        contexts * 4 * 8
    );
    let too_many = PagePool::new(&like, PoolSize::Pages(limit));
    assert!(
        matches!(too_many, Err(KvCacheError::TooManyMappings { .. })),
        "{too_many:?}"
    );
}

#[test]
fn a_pool_of_contexts_within_bytes_is_the_smaller_of_the_two() {
    let like = unpaged(2, DType::F32);
    let full = PagePool::new(&like, PoolSize::Contexts(4)).unwrap();
    let page = full.page_bytes() as u64;
    let within = |bytes: u64| {
        let size = PoolSize::ContextsWithin { contexts: 4, bytes };
        PagePool::new(&like, size).unwrap().pages()
    };
    assert_eq!(within(u64::MAX), full.pages());
    assert_eq!(within(3 * page + page / 2), 3);
    assert_eq!(within(0), 0);
}
