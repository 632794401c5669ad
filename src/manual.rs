//! The crate's manual, readable where the API is: the reference (every rule, with the test
//! that holds it), the design decisions (why each rule is what it is) and the departures (where
//! the crate leaves its specification or a vendor's page, and why), as the crate's `docs/`
//! folder writes them. Doc-only modules: they hold no code.
//!
//! Rustdoc elsewhere in the crate names a rule as "reference §n" and a choice as "decision N",
//! each a link into these pages.
//!
//! The pages link to each other with reference-style links defined at their end for readers of
//! the repository; the definitions below come first, and the first definition of a label wins,
//! so in rustdoc the same labels lead to these modules (and to the repository for the notes that
//! are not part of the manual).

/// The link labels the manual's pages use, as rustdoc resolves them.
macro_rules! manual_links {
    () => {
        concat!(
            // A definition cannot interrupt the module's summary paragraph (rustdoc joins the
            // doc fragments without a blank line); an HTML comment can, and ends it.
            "<!-- The manual's link targets. -->\n",
            "[reference.md]: crate::manual::reference\n",
            "[decisions.md]: crate::manual::decisions\n",
            "[decisions.md#logs-that-cannot-be-sent]: crate::manual::decisions#logs-that-cannot-be-sent\n",
            "[decisions.md#the-registration-time-schema-guard]: crate::manual::decisions#the-registration-time-schema-guard\n",
            "[departures.md]: crate::manual::departures\n",
            "[departures.md#from-the-original-system]: crate::manual::departures#from-the-original-system\n",
            "[departures.md#from-the-specification-the-issues-and-the-vendors-pages]: crate::manual::departures#from-the-specification-the-issues-and-the-vendors-pages\n",
            "[reference.zh.md]: <https://github.com/mektpoy/mektpoy/blob/main/docs/reference.zh.md>\n",
            "[decisions.zh.md]: <https://github.com/mektpoy/mektpoy/blob/main/docs/decisions.zh.md>\n",
            "[departures.zh.md]: <https://github.com/mektpoy/mektpoy/blob/main/docs/departures.zh.md>\n",
            "[benchmarks.md]: <https://github.com/mektpoy/mektpoy/blob/main/docs/benchmarks.md>\n",
            "[capability-rule.md]: <https://github.com/mektpoy/mektpoy/blob/main/docs/capability-rule.md>\n",
            "[proxy.md]: <https://github.com/mektpoy/mektpoy/blob/main/docs/proxy.md>\n",
            "[notes/in-history-tool-updates.md]: <https://github.com/mektpoy/mektpoy/blob/main/docs/notes/in-history-tool-updates.md>\n",
        )
    };
}

/// The reference: terms, rules and worked examples, section by section (§0–§14).
pub mod reference {
    #![doc = manual_links!()]
    #![doc = include_str!("../docs/reference.md")]
}

/// The design decisions, numbered; each says what was chosen, why, and which test checks it.
pub mod decisions {
    #![doc = manual_links!()]
    #![doc = include_str!("../docs/decisions.md")]
}

/// Where the crate departs from its specification, the original system or a vendor's page.
pub mod departures {
    #![doc = manual_links!()]
    #![doc = include_str!("../docs/departures.md")]
}
