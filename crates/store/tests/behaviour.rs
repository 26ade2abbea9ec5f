//! The shared store behaviour suite (larder-testkit) against the memory store.

use larder_store::{MemoryStore, Store};
use larder_testkit::behaviour;

#[tokio::test]
async fn the_memory_store_behaves_as_every_store_must() {
    let store = MemoryStore::builder().capacity_bytes(64 << 20).build().expect("store");
    behaviour::check_all(&store).await;
    behaviour::expiry(&store).await;
    behaviour::clear(&store).await;
}

#[tokio::test]
async fn an_l1_over_a_shared_store_behaves_as_every_store_must() {
    let l1 = || MemoryStore::builder().capacity_bytes(8 << 20).build().expect("l1");
    let shared = MemoryStore::builder().capacity_bytes(64 << 20).build().expect("l2");
    let tiered = larder_store::TieredStore::new(l1(), shared.clone(), std::time::Duration::from_millis(300));
    behaviour::check_all(&tiered).await;
    behaviour::expiry(&tiered).await;
    // A process reading the shared store directly sees purges made here at once.
    behaviour::purges_across(&tiered, &shared).await;

    // Another process with its own L1 sees them within its l1_ttl (spec/STORES.md §9), not later.
    let other = larder_store::TieredStore::new(l1(), shared.clone(), std::time::Duration::from_millis(300));
    let page = behaviour::entry("page", Some(60_000), 0, &["product-1"]);
    other.set("page", &page, None).await.expect("set");
    assert!(other.get("page").await.expect("get").is_some());
    tiered.purge_tag("product-1").await.expect("purge");
    assert_eq!(shared.get("page").await.expect("get"), None, "gone from the shared store at once");
    tokio::time::sleep(std::time::Duration::from_millis(350)).await;
    assert_eq!(other.get("page").await.expect("get"), None, "gone from the other process's L1 after l1_ttl");
}
