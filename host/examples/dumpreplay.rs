use schedhost::backend::sim::DeviceSpec;
use schedhost::fidelity::{parse_trace, replay};
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let (spec, _) = DeviceSpec::parse_with_faults(&a[2]).unwrap();
    let text = std::fs::read_to_string(&a[1]).unwrap();
    let t = parse_trace(&text).unwrap();
    let sim = replay(&t, &spec).unwrap();
    for (line, s) in text.lines().filter(|l| !l.trim().is_empty()).zip(sim) {
        println!("{line} {s:.1}");
    }
}
