//! p4relay-softswitch: see README.md.

use anyhow::Result;
use clap::Parser;

use p4relay_softswitch::config::{Args, Config};
use p4relay_softswitch::contract::CONTRACT;
use p4relay_softswitch::schema::Schema;

fn main() -> Result<()> {
    let args = Args::parse();
    if args.print_settings_table {
        print!("{}", p4relay_softswitch::config::settings_table());
        return Ok(());
    }
    let config = Config::resolve(&args)?;
    if args.dump_bfrt_json || args.dump_fixed_bfrt_json {
        let schema = Schema::build_sized(
            &CONTRACT,
            config.relay_entries,
            config.legs,
            config.v6,
            config.quality_half_bits,
        );
        println!(
            "{}",
            if args.dump_bfrt_json {
                &schema.bfrt_json
            } else {
                &schema.fixed_json
            }
        );
        return Ok(());
    }
    p4relay_softswitch::run(config)
}
