//! A failure deep in a child fiber, read from the fiber's trace.
//!
//! An order is checked by a child fiber, a few calls down, each an IO
//! block: `check_order` awaits `load_customer`, which awaits
//! `check_credit`, which raises an error. The parent joins each child in
//! turn and stops at the first failure, which it keeps as a value with
//! the traces `trace_errors` attaches (a loop with an early return). The
//! trace of the child fiber names this file and the lines of the
//! `.await`s that led to the failure (each such line is marked `// traced`
//! below; `main` checks that every one is in the trace).
//!
//! ```text
//! cargo run -p spindle-effect --example trace_failure
//! ```
//!
//! Its combinator form, the same program with `flat_map` and no blocks,
//! is `examples/combinator_forms/trace_failure.rs`.

use std::error::Error;
use std::fmt;

use spindle_effect::prelude::*;
use spindle_effect::{Traced, wstp::Runtime};

/// Why an order is refused.
#[derive(Debug, Clone, PartialEq)]
pub enum OrderError {
    /// The customer's credit is below the order's total.
    CreditTooLow {
        /// The customer.
        customer: String,
        /// The order's total.
        total: u64,
    },
}

impl fmt::Display for OrderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OrderError::CreditTooLow { customer, total } => {
                write!(f, "{customer}'s credit is too low for {total}")
            }
        }
    }
}

/// A customer's credit limit (a lookup, as a suspended side effect).
fn credit_of(customer: &str) -> IO<u64, OrderError> {
    let customer = customer.to_string();
    IO::delay(move || if customer == "ada" { 100 } else { 10 })
}

/// The innermost step: fails when the credit does not cover the total.
fn check_credit(customer: String, total: u64) -> IO<u64, OrderError> {
    IO::block(async move {
        let credit = credit_of(&customer).await?; // traced
        if credit < total {
            return IO::raise_error(OrderError::CreditTooLow { customer, total }).await; // traced
        }
        Ok(credit - total)
    })
}

/// One call up: finds the order's customer, then checks the credit.
fn load_customer(order: u32, total: u64) -> IO<(String, u64), OrderError> {
    IO::block(async move {
        let customer = IO::delay(move || if order % 2 == 0 { "ada" } else { "bob" }).await?;
        let left = check_credit(customer.to_string(), total).await?; // traced
        Ok((customer.to_string(), left))
    })
}

/// The child fiber's program: checks one order.
fn check_order(order: u32, total: u64) -> IO<String, OrderError> {
    IO::block(async move {
        let (customer, left) = load_customer(order, total).await?; // traced
        Ok(format!("order {order} for {customer}: {left} credit left"))
    })
}

/// The orders checked before the first failure, and that failure (a
/// value, with the child's trace and the parent's), if any.
pub type Checked = (Vec<String>, Option<Traced<OrderError>>);

/// The parent: checks the orders one by one, each on a child fiber, and
/// stops at the first failure.
fn check_orders(orders: Vec<(u32, u64)>) -> IO<Checked, Traced<OrderError>> {
    IO::block(async move {
        let mut checked = Vec::new();
        for (order, total) in orders {
            let child = check_order(order, total).start().value().await;
            match child.join_with_never().trace_errors().await {
                Ok(line) => checked.push(line),
                Err(failure) => return Ok((checked, Some(failure))),
            }
        }
        Ok((checked, None))
    })
}

/// What the run found: the orders checked before the failure, and the
/// failure with its traces.
pub struct Report {
    /// The orders checked before the failure.
    pub checked: Vec<String>,
    /// The failure, with the child's trace and the parent's.
    pub failure: Traced<OrderError>,
}

/// Checks four orders on the default executor: two pass, the third fails
/// in its child fiber, and the fourth is not checked.
pub fn run() -> Result<Report, Box<dyn Error>> {
    let orders = check_orders(vec![(2, 30), (4, 50), (7, 50), (6, 20)]);
    let checked = Runtime::new()?.block_on(orders)?.succeeded();
    let (checked, failure) = checked.ok_or("the orders are checked")?;
    let failure = failure.ok_or("order 7 fails")?;
    Ok(Report { checked, failure })
}

/// The lines of `source` marked `// traced`, as `file:line` (1-based):
/// a line that ends with the marker, or the line after a line that is
/// only the marker (where rustfmt moves a trailing comment).
pub fn traced_lines(file: &str, source: &str) -> Vec<String> {
    let lines: Vec<&str> = source.lines().collect();
    let mut marked = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim() == "// traced" {
            marked.push(i + 2);
        } else if line.trim_end().ends_with("// traced") {
            marked.push(i + 1);
        }
    }
    marked.into_iter().map(|n| format!("{file}:{n}")).collect()
}

/// Checks that the trace of the fiber that raised the error names every
/// marked line of this file.
pub fn check(report: &Report) -> Result<(), String> {
    let origin = report.failure.origin().to_string();
    for line in traced_lines(file!(), include_str!("trace_failure.rs")) {
        if !origin.contains(&format!("{line}:")) {
            return Err(format!("the trace does not name {line}:\n{origin}"));
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let report = run()?;
    for line in &report.checked {
        println!("{line}");
    }
    // The error, then the traces: the child fiber's (where the error was
    // raised) first, then the parent's.
    println!("\nfailed: {}", report.failure);
    if cfg!(feature = "tracing") {
        check(&report)?;
        println!(
            "\nthe child's trace names every `// traced` line of {}",
            file!()
        );
    }
    Ok(())
}
