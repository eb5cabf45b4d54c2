package algo

// RetiredTAT is the retired state of a GCRA bucket: a TAT no admission
// ever stores: larger than every TAT the
// gcra decision functions produce (at most MaxNow + MaxSpan + MaxWait =
// 5·2^60),
// yet small enough that Retired + B·T does not overflow (5.5·2^60 + 2^61 <
// 2^63). Every finite limit therefore denies a request against it and stores
// nothing: Admit and Reserve see a debt beyond any span and wait, and Refund
// finds a state that is not its reservation's. Keyed maps store it in a cell
// they remove, so that a goroutine still holding the cell can never admit on
// it; the goroutine sees it and looks the key up again.
//
// Unlimited admits against RetiredTAT as against any state; the buckets never
// store an Unlimited decision, so the cell stays retired.
const RetiredTAT = int64(11) << 59
