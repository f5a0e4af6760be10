/// Time passed on a clock since the stopwatch was started; works with `any Clock<Duration>`.
struct Stopwatch: Sendable {
    let elapsed: @Sendable () -> Duration

    private init(elapsed: @escaping @Sendable () -> Duration) { self.elapsed = elapsed }

    static func start(_ clock: any Clock<Duration>) -> Stopwatch { open(clock) }

    private static func open<C: Clock>(_ clock: C) -> Stopwatch where C.Duration == Duration {
        let start = clock.now
        return Stopwatch { start.duration(to: clock.now) }
    }
}
