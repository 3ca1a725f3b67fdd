//! The DiskSim importer on hostile files: a `.diskspecs`, the `.model` it names and a
//! `.seek` table (the input split at 0xff bytes), and the same bytes as a `.parv`. It parses
//! or fails with a message, never a panic, an abort or a stack overflow; and a spec it
//! imports is one `--device FILE.spec` takes back.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use schedhost::backend::sim::DeviceSpec;
use schedhost::backend::sim::drive::disksim;

fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("schedhost-fuzz-import-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        dir
    })
}

fn imports_back(imported: &disksim::Imported, source: &Path) {
    let text = disksim::to_spec_text(imported, source);
    if let Err(e) = DeviceSpec::parse_file(Path::new("imported.spec"), &text) {
        panic!("the importer wrote a spec its parser refuses: {e}\n{text}");
    }
}

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(3, |&b| b == 0xff);
    let dir = dir();
    let (specs, model, seek) = (dir.join("d.diskspecs"), dir.join("d.model"), dir.join("d.seek"));
    for (path, bytes) in [&specs, &model, &seek].into_iter().zip([
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    ]) {
        std::fs::write(path, bytes).expect("writing a scratch file");
    }
    if let Ok(imported) = disksim::import(&specs) {
        imports_back(&imported, &specs);
    }
    let parv = dir.join("d.parv");
    std::fs::write(&parv, data).expect("writing a scratch file");
    if let Ok(imported) = disksim::import_parv(&parv) {
        imports_back(&imported, &parv);
    }
});
