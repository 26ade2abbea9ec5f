//! `larder key`: the store key of a request (spec/FORMAT.md §5.3), as every language derives it.

use clap::Args;
use larder_format::key::{url_key, KeyOptions};

use crate::Failure;

/// Print the cache key of a request URL.
///
/// The key is the method, scheme, host and path, with query parameters sorted and tracking parameters
/// (utm_*, gclid, fbclid, msclkid) dropped, prefixed by the namespace; keys memcached would refuse are hashed.
#[derive(Args)]
pub struct KeyArgs {
    /// The request URL, e.g. https://shop.example/p/42?b=2&a=1
    url: String,
    /// The request method.
    #[arg(long, default_value = "GET")]
    method: String,
    /// Prefix keys with NAMESPACE and a colon.
    #[arg(long, default_value = "")]
    namespace: String,
    /// Also drop this query parameter (exact name, or a prefix ending in *); repeatable.
    #[arg(long = "drop", value_name = "PARAM")]
    drop_params: Vec<String>,
    /// Do not drop the default tracking parameters.
    #[arg(long)]
    no_default_drops: bool,
}

pub fn run(args: KeyArgs) -> Result<(), Failure> {
    let mut options = KeyOptions { namespace: args.namespace, ..KeyOptions::default() };
    if args.no_default_drops {
        options.drop_params.clear();
    }
    options.drop_params.extend(args.drop_params);
    let key = url_key(&args.method, &args.url, &options).map_err(Failure::input)?;
    crate::output::print_line(&key)
}
