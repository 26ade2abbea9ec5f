//! Deterministic, realistic benchmark data: a ~1 MB product-listing HTML page and ~4,000 user records, the two
//! shapes a web cache holds most (rendered pages, and serialized rows). The same seed gives the same bytes on every
//! machine, so figures from different runs describe the same input.

use serde::{Deserialize, Serialize};

/// splitmix64: a tiny, well-known generator; good enough to vary text and numbers, and stable forever.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

const ADJECTIVES: &[&str] = &[
    "classic",
    "organic",
    "lightweight",
    "vintage",
    "premium",
    "handmade",
    "waterproof",
    "compact",
    "ergonomic",
    "recycled",
    "wireless",
    "stainless",
    "bamboo",
    "merino",
    "ceramic",
    "foldable",
    "insulated",
    "minimalist",
];
const NOUNS: &[&str] = &[
    "backpack",
    "kettle",
    "sneaker",
    "lamp",
    "notebook",
    "jacket",
    "headphones",
    "mug",
    "blanket",
    "watch",
    "chair",
    "bottle",
    "scarf",
    "speaker",
    "skillet",
    "tent",
    "umbrella",
    "wallet",
    "keyboard",
    "planter",
];
const WORDS: &[&str] = &[
    "designed",
    "for",
    "everyday",
    "use",
    "with",
    "a",
    "durable",
    "finish",
    "and",
    "soft",
    "touch",
    "that",
    "lasts",
    "made",
    "from",
    "responsibly",
    "sourced",
    "materials",
    "easy",
    "to",
    "clean",
    "fits",
    "most",
    "needs",
    "the",
    "perfect",
    "gift",
    "ships",
    "in",
    "plastic-free",
    "packaging",
    "two-year",
    "warranty",
    "included",
];
const FIRST: &[&str] = &[
    "Ada",
    "Grace",
    "Alan",
    "Edsger",
    "Barbara",
    "Donald",
    "Margaret",
    "Ken",
    "Radia",
    "Linus",
    "Frances",
    "John",
    "Katherine",
    "Dennis",
    "Hedy",
    "Tim",
    "Sophie",
    "Guido",
    "Yukihiro",
    "Bjarne",
];
const LAST: &[&str] = &[
    "Lovelace",
    "Hopper",
    "Turing",
    "Dijkstra",
    "Liskov",
    "Knuth",
    "Hamilton",
    "Thompson",
    "Perlman",
    "Torvalds",
    "Allen",
    "McCarthy",
    "Johnson",
    "Ritchie",
    "Lamarr",
    "Berners-Lee",
    "Wilson",
    "van Rossum",
    "Matsumoto",
];
const CITIES: &[&str] =
    &["Lisbon", "Osaka", "Toronto", "Nairobi", "Berlin", "Austin", "Melbourne", "Oslo", "Lima", "Pune"];
const ROLES: &[&str] = &["admin", "editor", "viewer", "billing", "support", "owner"];

/// Between `min` and `min + spread - 1` words.
fn sentence(rng: &mut Rng, min: u64, spread: u64) -> String {
    let words = min + rng.below(spread);
    let mut out = String::new();
    for i in 0..words {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(rng.pick(WORDS));
    }
    out
}

/// A product-listing page of about `target_bytes` (the built-in sample uses 1,000,000).
pub fn product_listing_html(target_bytes: usize) -> String {
    let mut rng = Rng::new(0x1A2D_E401);
    let mut html = String::with_capacity(target_bytes + 4096);
    html.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>All products | Larder Goods</title>\n\
         <link rel=\"stylesheet\" href=\"/assets/application-5f2c1a.css\">\n<script src=\"/assets/application-9b1e77.js\" defer></script>\n\
         </head>\n<body class=\"products index\">\n<header class=\"site-header\"><nav><ul>\
         <li><a href=\"/\">Home</a></li><li><a href=\"/products\">Products</a></li><li><a href=\"/cart\">Cart</a></li>\
         </ul></nav></header>\n<main class=\"container\">\n<h1>All products</h1>\n<ul class=\"product-grid\">\n",
    );
    let mut id = 1000u64;
    while html.len() < target_bytes {
        id += 1 + rng.below(7);
        let name = format!("{} {}", rng.pick(ADJECTIVES), rng.pick(NOUNS));
        let price = 5 + rng.below(495);
        let cents = rng.below(100);
        let rating = 30 + rng.below(21);
        let reviews = rng.below(5000);
        let description = sentence(&mut rng, 12, 18);
        html.push_str(&format!(
            "  <li class=\"product-card\" data-product-id=\"{id}\">\n\
             \x20   <a href=\"/products/{id}-{slug}\" class=\"product-link\">\n\
             \x20     <img src=\"https://cdn.larder.example/images/products/{id}/thumb.webp\" alt=\"{name}\" width=\"320\" height=\"320\" loading=\"lazy\">\n\
             \x20     <h2 class=\"product-name\">{name}</h2>\n\
             \x20   </a>\n\
             \x20   <p class=\"product-description\">{description}</p>\n\
             \x20   <div class=\"product-meta\"><span class=\"price\" data-currency=\"USD\">${price}.{cents:02}</span>\
             <span class=\"rating\" title=\"{r1}.{r2} out of 5\">{r1}.{r2}</span><span class=\"reviews\">({reviews} reviews)</span></div>\n\
             \x20   <form action=\"/cart/items\" method=\"post\" class=\"add-to-cart\"><input type=\"hidden\" name=\"product_id\" value=\"{id}\">\
             <button type=\"submit\" class=\"btn btn-primary\">Add to cart</button></form>\n\
             \x20 </li>\n",
            slug = name.replace(' ', "-"),
            r1 = rating / 10,
            r2 = rating % 10,
        ));
    }
    html.push_str("</ul>\n</main>\n<footer class=\"site-footer\">&copy; Larder Goods</footer>\n</body>\n</html>\n");
    html
}

/// A user record, as an app would cache a row with a few associations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct User {
    pub id: u64,
    pub name: String,
    pub email: String,
    pub active: bool,
    pub roles: Vec<String>,
    pub score: f64,
    pub created_at: u64,
    pub address: Address,
    pub bio: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Address {
    pub street: String,
    pub city: String,
    pub zip: String,
}

/// `count` user records (the built-in sample uses 4,000).
pub fn users(count: usize) -> Vec<User> {
    let mut rng = Rng::new(0x05E2_5EED);
    (0..count as u64)
        .map(|id| {
            let first = rng.pick(FIRST);
            let last = rng.pick(LAST);
            let roles = (0..1 + rng.below(3)).map(|_| rng.pick(ROLES).to_owned()).collect();
            User {
                id: 100_000 + id,
                name: format!("{first} {last}"),
                email: format!("{}.{}{}@example.com", first.to_lowercase(), last.to_lowercase().replace(' ', ""), id),
                active: rng.below(4) != 0,
                roles,
                score: rng.below(100_000) as f64 / 100.0,
                created_at: 1_600_000_000_000 + rng.below(150_000_000_000),
                address: Address {
                    street: format!("{} {} Street", 1 + rng.below(999), rng.pick(LAST)),
                    city: rng.pick(CITIES).to_owned(),
                    zip: format!("{:05}", rng.below(100_000)),
                },
                bio: sentence(&mut rng, 8, 16),
            }
        })
        .collect()
}

/// The first records of `all` whose MessagePack form is at most about `bytes` long (at least one record).
pub fn users_of_size(all: &[User], bytes: usize) -> Vec<User> {
    let mut out = Vec::new();
    let mut size = 1;
    for user in all {
        let len = rmp_serde::to_vec_named(user).map(|v| v.len()).unwrap_or(0);
        if !out.is_empty() && size + len > bytes {
            break;
        }
        size += len;
        out.push(user.clone());
    }
    out
}

/// Key indices to visit: uniform, or Zipf-distributed with exponent `s` over a random permutation of the keys (so
/// the hot keys are scattered, not "1", "2", "3").
pub fn key_indices(entries: usize, count: usize, seed: u64, zipf: Option<f64>) -> Vec<u32> {
    let mut rng = Rng::new(seed);
    let Some(s) = zipf else {
        return (0..count).map(|_| rng.below(entries as u64) as u32).collect();
    };
    let mut cumulative = Vec::with_capacity(entries);
    let mut total = 0.0;
    for rank in 1..=entries {
        total += 1.0 / (rank as f64).powf(s);
        cumulative.push(total);
    }
    let mut permutation: Vec<u32> = (0..entries as u32).collect();
    for i in (1..entries).rev() {
        permutation.swap(i, rng.below(i as u64 + 1) as usize);
    }
    (0..count)
        .map(|_| {
            let target = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * total;
            let rank = cumulative.partition_point(|&c| c < target).min(entries - 1);
            permutation[rank]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_deterministic_and_near_their_target_sizes() {
        let html = product_listing_html(1_000_000);
        assert_eq!(html, product_listing_html(1_000_000));
        assert!((1_000_000..1_010_000).contains(&html.len()), "{}", html.len());
        let records = users(4000);
        assert_eq!(records, users(4000));
        assert_eq!(records.len(), 4000);
        let packed = rmp_serde::to_vec_named(&records).expect("serializes").len();
        assert!((500_000..2_000_000).contains(&packed), "{packed}");
    }

    #[test]
    fn users_of_size_stays_within_the_requested_size() {
        let all = users(200);
        let some = users_of_size(&all, 1024);
        let packed = rmp_serde::to_vec_named(&some).expect("serializes").len();
        assert!(packed <= 1024 && packed > 512, "{packed}");
    }
}
