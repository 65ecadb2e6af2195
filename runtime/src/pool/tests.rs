use super::*;
use std::collections::HashSet;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};

fn pool(threads: usize) -> ThreadPool {
    ThreadPool::new(threads).unwrap()
}

/// Runs `n` tasks that count their own index and checks each ran exactly once.
fn assert_each_task_runs_once(pool: &ThreadPool, n: i64) {
    let counts: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
    let code = pool.parallel_for(n, &|i| {
        counts[i as usize].fetch_add(1, Ordering::Relaxed);
        0
    });
    assert_eq!(code, 0);
    assert!(
        counts.iter().all(|c| c.load(Ordering::Relaxed) == 1),
        "n = {n}"
    );
}

#[test]
fn zero_one_and_many_tasks_each_run_exactly_once() {
    let pool = pool(3);
    assert_eq!(pool.threads(), 3);
    let called = AtomicU32::new(0);
    let code = pool.parallel_for(0, &|_| {
        called.fetch_add(1, Ordering::Relaxed);
        1
    });
    assert_eq!((code, called.load(Ordering::Relaxed)), (0, 0));
    for n in [1, 2, 7, 1000] {
        assert_each_task_runs_once(&pool, n);
    }
}

#[test]
fn many_small_launches_stay_correct() {
    let pool = pool(2);
    let total = AtomicI64::new(0);
    for launch in 0..5000i64 {
        let code = pool.parallel_for(4, &|i| {
            total.fetch_add(launch * 4 + i, Ordering::Relaxed);
            0
        });
        assert_eq!(code, 0);
    }
    let n = 5000 * 4;
    assert_eq!(total.load(Ordering::Relaxed), n * (n - 1) / 2);
}

#[test]
fn work_is_spread_over_the_workers() {
    let pool = pool(2);
    let ids = Mutex::new(HashSet::new());
    pool.parallel_for(8, &|_| {
        ids.lock().unwrap().insert(thread::current().id());
        thread::sleep(Duration::from_millis(5));
        0
    });
    assert_eq!(ids.lock().unwrap().len(), 2);
}

#[test]
fn a_failing_task_sets_the_result_and_stops_the_rest() {
    let pool = pool(2);
    let ran = AtomicU32::new(0);
    let code = pool.parallel_for(1000, &|i| {
        ran.fetch_add(1, Ordering::Relaxed);
        if i == 3 {
            7
        } else {
            0
        }
    });
    assert_eq!(code, 7);
    assert!(
        ran.load(Ordering::Relaxed) < 1000,
        "later chunks are skipped"
    );
    assert_each_task_runs_once(&pool, 100);
}

#[test]
fn panics_become_an_error_code_and_do_not_poison_the_pool() {
    for threads in [1, 2] {
        let pool = pool(threads);
        let code = pool.parallel_for(16, &|i| {
            if i == 5 {
                panic!("task 5 fails");
            }
            0
        });
        assert_eq!(code, TASK_PANICKED);
        assert_each_task_runs_once(&pool, 64);
    }
}

#[test]
fn nested_launches_run_inline() {
    let pool = pool(2);
    let sum = AtomicI64::new(0);
    let code = pool.parallel_for(4, &|i| {
        pool.parallel_for(10, &|j| {
            sum.fetch_add(i * 10 + j, Ordering::Relaxed);
            0
        })
    });
    assert_eq!(code, 0);
    assert_eq!(sum.load(Ordering::Relaxed), (0..40).sum::<i64>());
}

#[test]
fn launches_from_several_threads_are_serialized() {
    let pool = pool(2);
    let total = AtomicI64::new(0);
    thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                for _ in 0..300 {
                    pool.parallel_for(5, &|i| {
                        total.fetch_add(i, Ordering::Relaxed);
                        0
                    });
                }
            });
        }
    });
    assert_eq!(total.load(Ordering::Relaxed), 3 * 300 * 10);
}

#[test]
fn idle_workers_park_and_wake_up() {
    let pool = pool(2);
    thread::sleep(SPIN_TIME * 5);
    assert_each_task_runs_once(&pool, 50);
    assert!(ThreadPool::default_threads() >= 1);
    assert!(ThreadPool::global().threads() >= 1);
}

#[test]
fn chunks_shrink_to_single_tasks_and_cover_every_task_in_order() {
    let shared = Shared::new();
    let task: &(dyn Fn(i64) -> i32 + Sync) = &|_| 0;
    let job = Job::new(&task, 100, 4);
    let chunks: Vec<_> = std::iter::from_fn(|| shared.grab(&job)).collect();
    let sizes: Vec<i64> = chunks.iter().map(|c| c.end - c.start).collect();
    assert_eq!(sizes[0], 25, "a quarter of the tasks first: {sizes:?}");
    assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "{sizes:?}");
    assert_eq!(sizes.last(), Some(&1), "{sizes:?}");
    let covered: Vec<i64> = chunks.into_iter().flatten().collect();
    assert_eq!(covered, (0..100).collect::<Vec<_>>());
}
