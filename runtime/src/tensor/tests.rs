use super::*;
use half::{bf16, f16};
use ndarray::{arr2, ArrayD, IxDyn};

#[test]
fn owned_tensors_are_aligned_and_typed() {
    let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    assert_eq!(t.shape(), &[2, 3]);
    assert_eq!(t.strides(), &[3, 1]);
    assert_eq!((t.numel(), t.nbytes()), (6, 24));
    assert_eq!(t.data_ptr() as usize % BUFFER_ALIGN, 0);
    assert_eq!(t.storage_kind(), StorageKind::Owned);
    assert_eq!(
        t.as_slice::<f32>().unwrap(),
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
    assert_eq!(
        t.as_slice::<i32>().unwrap_err(),
        TensorError::DtypeMismatch {
            expected: DType::I32,
            got: DType::F32
        }
    );
    let zeros = Tensor::zeros(DType::I64, &[3]).unwrap();
    assert_eq!(zeros.as_slice::<i64>().unwrap(), &[0, 0, 0]);
}

/// Whether the mapping holding `addr` may get transparent huge pages (its `THPeligible`
/// line in `/proc/self/smaps`); `None` where there is no such file or line.
fn thp_eligible(addr: usize) -> Option<bool> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut inside = false;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((start, end)) = first.split_once('-').filter(|_| !first.ends_with(':')) {
            let bound = |hex| usize::from_str_radix(hex, 16).unwrap_or(0);
            inside = (bound(start)..bound(end)).contains(&addr);
        } else if let (true, Some(flag)) = (inside, line.strip_prefix("THPeligible:")) {
            return Some(flag.trim() == "1");
        }
    }
    None
}

/// Whether `/proc/self/smaps` shows a mapping's huge-page advice. Under emulation
/// (qemu-user runs this suite for aarch64) it does not; a mapping advised right here (not
/// through the code under test, so a test cannot skip itself when that code stops asking)
/// tells.
fn smaps_shows_huge_page_advice() -> bool {
    let mut advised = memmap2::MmapMut::map_anon(4 << 20).unwrap();
    // SAFETY: the range is exactly the live mapping; the advice only picks its pages.
    unsafe {
        libc::madvise(
            advised.as_mut_ptr().cast(),
            advised.len(),
            libc::MADV_HUGEPAGE,
        )
    };
    thp_eligible(advised.as_ptr() as usize) == Some(true)
}

#[test]
fn large_buffers_ask_for_huge_pages_and_base_page_buffers_do_not() {
    use buffer::{huge_pages_available, Buffer, Pages, HUGE_PAGES_ENV, THP_MODE_FILE};
    let mode = std::fs::read_to_string(THP_MODE_FILE);
    if !huge_pages_available() {
        // No transparent huge pages here (not Linux, or switched off): nothing to ask.
        let switched_off = std::env::var(HUGE_PAGES_ENV)
            .is_ok_and(|value| !buffer::huge_pages_wanted(Some(&value), Some("[madvise]")));
        assert!(
            switched_off || !mode.is_ok_and(|m| m.contains("[always]") || m.contains("[madvise]"))
        );
        return;
    }
    if !smaps_shows_huge_page_advice() {
        return;
    }
    let weights = Buffer::zeroed(4 << 20, StorageKind::Owned).unwrap();
    assert_eq!(thp_eligible(weights.ptr_at(0) as usize), Some(true));
    let kv = Buffer::zeroed_in(4 << 20, StorageKind::Owned, Pages::Base).unwrap();
    // In `madvise` mode only mappings that asked get them; in `always` mode every one.
    let always = mode.unwrap().contains("[always]");
    assert_eq!(thp_eligible(kv.ptr_at(0) as usize), Some(always));
}

#[test]
fn large_tensors_are_zeroed_page_aligned_mappings() {
    let len = 3 << 19; // 1.5 Mi elements: over the mapping threshold
    let mut t = Tensor::zeros(DType::F32, &[len]).unwrap();
    assert_eq!(t.storage_kind(), StorageKind::Owned);
    assert_eq!(t.data_ptr() as usize % 4096, 0);
    let values = t.as_mut_slice::<f32>().unwrap();
    assert!(values.iter().all(|&v| v == 0.0));
    values[len as usize - 1] = 7.0;
    let view = t.clone();
    drop(t);
    assert_eq!(view.as_slice::<f32>().unwrap()[len as usize - 1], 7.0);
}

#[test]
fn bad_shapes_and_lengths_are_rejected() {
    assert!(matches!(
        Tensor::zeros(DType::F32, &[2, -1]),
        Err(TensorError::NegativeExtent { .. })
    ));
    assert!(matches!(
        Tensor::zeros(DType::F32, &[i64::MAX, 4]),
        Err(TensorError::TooLarge { .. })
    ));
    let err = Tensor::from_slice(&[1i32, 2, 3], &[2, 2]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "shape [2, 2] of i32 needs 4 elements, got 3"
    );
}

#[test]
fn u4_tensors_pack_two_per_byte() {
    let t = Tensor::from_bytes(DType::U4, &[5], &[0x21, 0x43, 0x05]).unwrap();
    assert_eq!(t.nbytes(), 3);
    assert_eq!(t.as_bytes().unwrap(), &[0x21, 0x43, 0x05]);
    let err = Tensor::from_bytes(DType::U4, &[5], &[0, 0]).unwrap_err();
    assert_eq!(err.to_string(), "shape [5] of u4 needs 3 bytes, got 2");
    let rows = Tensor::from_bytes(DType::U4, &[3, 2], &[0x10, 0x32, 0x54]).unwrap();
    assert_eq!(
        rows.narrow(0, 1, 2).unwrap().as_bytes().unwrap(),
        &[0x32, 0x54]
    );
    let odd = Tensor::from_bytes(DType::U4, &[3, 1], &[0x10, 0x02]).unwrap();
    assert_eq!(
        odd.narrow(0, 1, 1).unwrap_err(),
        TensorError::SubByteView { dtype: DType::U4 }
    );
}

#[test]
fn strides_are_row_major_beyond_the_inline_rank_and_skip_empty_axes() {
    let t = Tensor::zeros(DType::I8, &[2, 3, 0, 4, 5]).unwrap();
    assert_eq!(t.strides(), &[60, 20, 20, 5, 1]);
    assert!(t.is_contiguous());
    let t = Tensor::zeros(DType::I8, &[2, 3, 1, 4, 5]).unwrap();
    assert_eq!(t.strides(), &[60, 20, 20, 5, 1]);
    assert!(t.clone().is_contiguous());
    assert!(!t.narrow(3, 1, 2).unwrap().is_contiguous());
    assert!(t.narrow(0, 1, 1).unwrap().is_contiguous());
}

#[test]
fn narrow_makes_strided_views_that_copy_out() {
    let t = Tensor::from_slice(&(0..12).collect::<Vec<i32>>(), &[3, 4]).unwrap();
    let cols = t.narrow(1, 1, 2).unwrap();
    assert_eq!(cols.shape(), &[3, 2]);
    assert_eq!(cols.strides(), &[4, 1]);
    assert!(!cols.is_contiguous());
    assert!(matches!(
        cols.as_slice::<i32>(),
        Err(TensorError::NotContiguous { .. })
    ));
    let copy = cols.deep_copy().unwrap();
    assert_eq!(copy.as_slice::<i32>().unwrap(), &[1, 2, 5, 6, 9, 10]);
    assert_eq!(
        cols.to_ndarray::<i32>().unwrap(),
        arr2(&[[1, 2], [5, 6], [9, 10]]).into_dyn()
    );
    let rows = t.narrow(0, 1, 2).unwrap();
    assert!(rows.is_contiguous());
    assert_eq!(
        rows.as_slice::<i32>().unwrap(),
        &(4..12).collect::<Vec<_>>()[..]
    );
    assert_eq!(
        t.narrow(2, 0, 1).unwrap_err(),
        TensorError::AxisOutOfRange { axis: 2, rank: 2 }
    );
    assert!(matches!(
        t.narrow(0, 2, 2),
        Err(TensorError::OutOfRange {
            start: 2,
            end: 4,
            available: 3
        })
    ));
}

#[test]
fn mutation_needs_the_only_handle() {
    let mut t = Tensor::zeros(DType::F32, &[4]).unwrap();
    let view = t.narrow(0, 0, 2).unwrap();
    assert_eq!(
        t.as_mut_slice::<f32>().unwrap_err(),
        TensorError::Shared {
            kind: StorageKind::Owned
        }
    );
    drop(view);
    t.as_mut_slice::<f32>().unwrap()[3] = 7.0;
    assert_eq!(t.as_slice::<f32>().unwrap(), &[0.0, 0.0, 0.0, 7.0]);
}

#[test]
fn borrowed_memory_is_read_only_and_kept_alive() {
    let owner = Arc::new(vec![1.5f32, -2.0, 4.25]);
    let ptr = owner.as_ptr().cast::<u8>();
    // SAFETY: `owner` keeps the Vec alive and nothing writes to it.
    let mut t = unsafe { Tensor::from_borrowed(ptr, 12, owner.clone(), DType::F32, &[3]) }.unwrap();
    drop(owner);
    assert_eq!(t.storage_kind(), StorageKind::Borrowed);
    assert_eq!(t.as_slice::<f32>().unwrap(), &[1.5, -2.0, 4.25]);
    assert_eq!(t.as_mut_slice::<f32>().unwrap_err(), TensorError::ReadOnly);
    let dummy: Arc<dyn Any + Send + Sync> = Arc::new(());
    // SAFETY: the length check fails before the pointer is used.
    let short = unsafe { Tensor::from_borrowed(ptr, 8, dummy.clone(), DType::F32, &[3]) };
    assert!(matches!(
        short,
        Err(TensorError::DataLength {
            expected: 12,
            got: 8,
            ..
        })
    ));
    // SAFETY: a null pointer is rejected before use.
    let null = unsafe { Tensor::from_borrowed(std::ptr::null(), 0, dummy, DType::F32, &[0]) };
    assert_eq!(null.unwrap_err(), TensorError::NullPointer);
}

#[test]
fn misaligned_borrowed_memory_refuses_typed_access() {
    let owner = Arc::new([0u8; 16]);
    // SAFETY: bytes 1..13 are inside `owner`, which stays alive and is never written.
    let t = unsafe {
        Tensor::from_borrowed(owner.as_ptr().add(1), 12, owner.clone(), DType::F32, &[3])
    }
    .unwrap();
    assert!(matches!(
        t.as_slice::<f32>(),
        Err(TensorError::Misaligned { align: 4, .. })
    ));
    assert_eq!(t.as_bytes().unwrap().len(), 12);
}

#[test]
fn arena_views_share_one_region() {
    let arena = Arena::new(256).unwrap();
    assert_eq!(arena.size(), 256);
    assert_eq!(arena.base_ptr() as usize % BUFFER_ALIGN, 0);
    let a = arena.view(64, DType::F32, &[4, 4]).unwrap();
    assert_eq!(a.storage_kind(), StorageKind::Arena);
    assert_eq!(a.data_ptr() as usize, arena.base_ptr() as usize + 64);
    let err = arena.view(200, DType::F32, &[16]).unwrap_err();
    assert_eq!(
        err,
        TensorError::OutOfRange {
            start: 200,
            end: 264,
            available: 256
        }
    );
}

#[test]
fn ndarray_round_trips_f32_i32_i64() {
    let a = ArrayD::from_shape_vec(IxDyn(&[2, 3]), vec![0.5f32, 1.0, -2.0, 3.0, 4.5, 6.0]).unwrap();
    let t = Tensor::from_ndarray(&a).unwrap();
    assert_eq!((t.dtype(), t.shape()), (DType::F32, &[2i64, 3][..]));
    assert_eq!(t.to_ndarray::<f32>().unwrap(), a);
    let ints = arr2(&[[1i32, 2], [3, 4]]);
    let transposed = Tensor::from_ndarray(&ints.t()).unwrap();
    assert_eq!(transposed.as_slice::<i32>().unwrap(), &[1, 3, 2, 4]);
    let longs = arr2(&[[i64::MIN, 0, i64::MAX]]);
    let t = Tensor::from_ndarray(&longs).unwrap();
    assert_eq!(t.to_ndarray::<i64>().unwrap(), longs.into_dyn());
    assert!(matches!(
        t.to_ndarray::<i32>(),
        Err(TensorError::DtypeMismatch { .. })
    ));
}

#[test]
fn ndarray_converts_f16_and_bf16_through_half() {
    let values = arr2(&[[1.0f32, -0.5], [65504.0, 1.0 / 3.0]]);
    let h = Tensor::from_ndarray_f32(&values, DType::F16).unwrap();
    assert_eq!(h.dtype(), DType::F16);
    assert_eq!(h.as_slice::<f16>().unwrap()[3], f16::from_f32(1.0 / 3.0));
    let back = h.to_ndarray_f32().unwrap();
    assert_eq!(back[[1, 0]], 65504.0);
    assert!((back[[1, 1]] - 1.0 / 3.0).abs() < 1e-3);
    let b = Tensor::from_ndarray_f32(&values, DType::BF16).unwrap();
    let back = b.to_ndarray_f32().unwrap();
    assert_eq!(back[[0, 1]], -0.5);
    assert_eq!(back[[1, 0]], 65536.0, "bf16 rounds 65504 to 2^16");
    let halves = ArrayD::from_shape_vec(IxDyn(&[2]), vec![bf16::from_f32(2.5), bf16::ONE]).unwrap();
    let t = Tensor::from_ndarray(&halves).unwrap();
    assert_eq!(t.to_ndarray::<bf16>().unwrap(), halves);
    assert_eq!(
        Tensor::from_ndarray_f32(&values, DType::I8).unwrap_err(),
        TensorError::NotFloat { got: DType::I8 }
    );
    let ints = Tensor::from_slice(&[1i32], &[1]).unwrap();
    assert_eq!(
        ints.to_ndarray_f32().unwrap_err(),
        TensorError::NotFloat { got: DType::I32 }
    );
}

#[test]
fn reshaped_views_share_storage_and_keep_the_element_count() {
    let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let v = t.reshaped(&[3, 1, 2]).unwrap();
    assert_eq!(v.shape(), &[3, 1, 2]);
    assert_eq!(v.data_ptr(), t.data_ptr(), "a view, not a copy");
    assert_eq!(v.as_slice::<f32>().unwrap(), t.as_slice::<f32>().unwrap());
    let err = t.reshaped(&[4, 2]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot view shape [2, 3] as [4, 2]: the element counts differ"
    );
    assert!(matches!(
        t.reshaped(&[-6]),
        Err(TensorError::NegativeExtent { .. })
    ));
}

/// With [`buffer::HUGE_PAGES_ENV`] at `0`, a large buffer does not ask for huge pages.
/// The switch is read once per process, so the test runs itself in a child process with
/// it set; it checks only in `madvise` mode (in `always` mode every mapping gets them).
#[test]
fn switched_off_huge_pages_leave_large_buffers_in_base_pages() {
    use buffer::{Buffer, HUGE_PAGES_ENV, THP_MODE_FILE};
    const CHILD: &str = "tensor::tests::switched_off_huge_pages_leave_large_buffers_in_base_pages";
    let madvise_mode =
        std::fs::read_to_string(THP_MODE_FILE).is_ok_and(|m| m.contains("[madvise]"));
    if !madvise_mode || !smaps_shows_huge_page_advice() {
        return;
    }
    if std::env::var(HUGE_PAGES_ENV).as_deref() != Ok("0") {
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", CHILD, "--test-threads", "1"])
            .env(HUGE_PAGES_ENV, "0")
            .status()
            .unwrap();
        assert!(
            status.success(),
            "the child run with {HUGE_PAGES_ENV}=0 failed"
        );
        return;
    }
    let buffer = Buffer::zeroed(4 << 20, StorageKind::Owned).unwrap();
    assert_eq!(thp_eligible(buffer.ptr_at(0) as usize), Some(false));
}

#[test]
fn huge_pages_are_wanted_where_the_os_gives_them_unless_switched_off() {
    use buffer::huge_pages_wanted;
    let os = cfg!(any(target_os = "linux", target_os = "android"));
    for mode in ["always [madvise] never\n", "[always] madvise never\n"] {
        for setting in [None, Some("1"), Some("on"), Some("")] {
            assert_eq!(
                huge_pages_wanted(setting, Some(mode)),
                os,
                "{setting:?} {mode}"
            );
        }
        for off in ["0", "off", "false", " FALSE\n", "Off"] {
            assert!(!huge_pages_wanted(Some(off), Some(mode)), "{off:?} {mode}");
        }
    }
    assert!(!huge_pages_wanted(None, Some("always madvise [never]\n")));
    assert!(!huge_pages_wanted(None, None));
}

#[test]
fn writes_past_a_buffer_end_are_errors_that_write_nothing() {
    let buffer = Buffer::zeroed(64, StorageKind::Owned).unwrap();
    // SAFETY: the buffer is local and unshared.
    let past = unsafe { buffer.write_at(60, &[1; 8]) };
    assert_eq!(
        past.unwrap_err().to_string(),
        "cannot write 8 bytes at byte 60 of a 64-byte owned buffer"
    );
    // SAFETY: as above.
    let wrapping = unsafe { buffer.write_at(usize::MAX, &[1]) };
    assert!(wrapping.is_err());
    // SAFETY: as above.
    unsafe { buffer.write_at(56, &[7; 8]).unwrap() };
    // SAFETY: 64 bytes were allocated; nothing writes meanwhile.
    let bytes = unsafe { std::slice::from_raw_parts(buffer.ptr_at(0), 64) };
    assert_eq!((bytes[55], bytes[56], bytes[63]), (0, 7, 7));
}

#[test]
fn base_page_buffers_are_mapped_from_one_page_so_only_written_pages_are_resident() {
    // A small model's KV cache stream (512 KiB): mapped, not taken from the heap, whose
    // zeroing would make every page resident at once.
    use buffer::{Buffer, Pages};
    let kv = Buffer::zeroed_in(512 << 10, StorageKind::Owned, Pages::Base).unwrap();
    assert!(kv.is_mapped());
    assert_eq!(kv.ptr_at(0) as usize % 4096, 0);
    let small = Buffer::zeroed_in(512 << 10, StorageKind::Owned, Pages::Huge).unwrap();
    assert!(!small.is_mapped());
}
