//! ring.json (spec/STORES.md §4.2): the same continuum and the same server for every key as the reference.

use std::path::Path;

use larder_memcached::ring::{key_hash, Ring, RingServer};

use crate::{cases, each, str_field, Checked};

pub fn check(path: &Path) -> Checked {
    let doc = crate::load(path)?;
    Ok(each(cases(&doc)?, |case| {
        let name = str_field(case, "name");
        let servers: Vec<RingServer> = case["servers"]
            .as_array()
            .expect("servers")
            .iter()
            .map(|s| RingServer {
                host: s["host"].as_str().expect("host").to_owned(),
                port: s["port"].as_u64().expect("port") as u16,
                weight: s["weight"].as_u64().expect("weight") as u32,
            })
            .collect();
        let ejected: Vec<usize> = case["ejected"]
            .as_array()
            .map(|e| e.iter().map(|i| i.as_u64().expect("index") as usize).collect())
            .unwrap_or_default();
        let ring = Ring::build(&servers, |i| !ejected.contains(&i));
        assert_eq!(ring.points().len() as u64, case["points"].as_u64().expect("points"), "{name}");
        for (point, expected) in ring.points().iter().zip(case["first_points"].as_array().expect("first")) {
            assert_eq!(u64::from(point.0), expected[0].as_u64().expect("value"), "{name}");
            assert_eq!(point.1 as u64, expected[1].as_u64().expect("server"), "{name}");
        }
        for k in case["keys"].as_array().expect("keys") {
            let key = k["key"].as_str().expect("key");
            assert_eq!(u64::from(key_hash(key)), k["hash"].as_u64().expect("hash"), "{name}: hash of {key:?}");
            assert_eq!(ring.server_for(key).map(|s| s as u64), k["server"].as_u64(), "{name}: server of {key:?}");
        }
    }))
}
