//! The deliberately broken rules the replication simulation switches on, one per run, to show
//! that its invariants catch each (test builds only). The leader and follower cores hold an
//! optional one; the simulation (`simulation.rs`) picks it.

/// A deliberately broken rule, switched on in one run to show the invariants catch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The leader's high watermark is its own log end, ignoring the ISR.
    HwFromLeaderOnly,
    /// Followers never truncate a divergent tail.
    SkipTruncation,
    /// The leader shrinks its ISR before the controller commits it (against KIP-497).
    ShrinkBeforeCommit,
    /// The high watermark waits for the committed ISR only, not a member being added.
    HwOverCommittedIsr,
    /// A follower joins the ISR without holding the start of the leader's epoch.
    ExpandBelowEpochStart,
}
