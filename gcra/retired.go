package gcra

// Retired is a state no admission ever stores: larger than every TAT the
// decision functions produce (at most MaxNow + MaxSpan + MaxWait = 5·2^60),
// yet small enough that Retired + B·T does not overflow (5.5·2^60 + 2^61 <
// 2^63). Every finite limit therefore denies a request against it and stores
// nothing: Admit and Reserve see a debt beyond any span and wait, and Refund
// finds a state that is not its reservation's. Keyed maps store it in a cell
// they remove, so that a goroutine still holding the cell can never admit on
// it; the goroutine sees IsRetired and looks the key up again.
//
// Unlimited admits against Retired as against any state; the buckets never
// store an Unlimited decision, so the cell stays retired.
const Retired = int64(11) << 59

// IsRetired reports whether tat is the Retired state.
func IsRetired(tat int64) bool { return tat == Retired }
