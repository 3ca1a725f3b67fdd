//! The canonical ABI as the host speaks it by hand (wasm32): where each value it reads from
//! or writes to guest memory lies, in bytes from the value's start, and the core signature
//! of the exports of its `turn` crossing ([`TURN_EXPORTS`]). Hand-placed, so `layout_matches_the_wit` and
//! `exports_match_the_wit` check every one against `wit/policy.wit` with wit-parser.

/// A string or a list: its pointer at 0, its length here.
pub const LEN: u32 = 4;
/// `result<_, string>`: the discriminant at 0, the error's string here.
pub const RESULT_ERR: u32 = 4;
/// `option<s64>`: the discriminant at 0, the value here.
pub const OPTION_S64_VALUE: u32 = 8;
/// `policy-info`: `name` at 0, then these.
pub const INFO_VERSION: u32 = 8;
pub const INFO_MERGE_VETO: u32 = 16;
pub const INFO_COMPLETIONS: u32 = 17;
pub const INFO_WEIGHTED_TAGS: u32 = 18;
/// `tunable`: its size in a list, `name` at 0, then these.
pub const TUNABLE_SIZE: u32 = 48;
pub const TUNABLE_DEFAULT: u32 = 8;
pub const TUNABLE_MIN: u32 = 16;
pub const TUNABLE_MAX: u32 = 24;
pub const TUNABLE_UNIT: u32 = 32;
pub const TUNABLE_HELP: u32 = 40;
/// `dispatch-answer`: `ids` at 0, `wake-at-ns`'s discriminant here and its value after.
pub const ANSWER_WAKE: u32 = 8;
pub const ANSWER_WAKE_VALUE: u32 = 16;
/// `tuple<string, s64>`, one of `init`'s settings: its size, the string at 0, the value.
pub const SETTING_SIZE: usize = 16;
pub const SETTING_VALUE: usize = 8;
/// `merge-event`: its size, `target` at 0, then these.
pub const EVENT_SIZE: usize = 40;
pub const EVENT_SECTOR: usize = 8;
pub const EVENT_SECTORS: usize = 16;
pub const EVENT_KIND: usize = 20;
pub const EVENT_ABSORBED: usize = 24;
pub const EVENT_ABSORBED_VALUE: usize = 32;

/// A core wasm value type, as the canonical ABI flattens the interface's types to (wasm32:
/// pointers and lengths are `I32`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flat {
    I32,
    I64,
}

use Flat::{I32, I64};

/// The exports of the host's `turn` crossing, with their core signatures (params,
/// results); the other exports' are built from their types (`super::exports`).
pub const TURN_EXPORTS: &[(&str, &[Flat], &[Flat])] = &[
    ("turn", &[I64; 7], &[I32]),
    ("turn-after-completion", &[I64; 12], &[I32]),
    ("turn-words", &[I64, I64, I32, I32, I32, I32, I32], &[I32]),
    ("take-answer", &[], &[I32]),
];

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use wit_parser::abi::{AbiVariant, WasmType};
    use wit_parser::{Int, Resolve, SizeAlign, Type, TypeDefKind};

    use super::*;

    /// The interface as wit-parser reads it, with every type's size and alignment.
    struct Wit {
        resolve: Resolve,
        sizes: SizeAlign,
    }

    impl Wit {
        fn load() -> Self {
            let mut resolve = Resolve::new();
            resolve
                .push_file(concat!(env!("CARGO_MANIFEST_DIR"), "/../wit/policy.wit"))
                .expect("wit/policy.wit parses");
            let mut sizes = SizeAlign::default();
            sizes.fill(&resolve);
            Self { resolve, sizes }
        }

        fn kind(&self, ty: &Type) -> &TypeDefKind {
            let Type::Id(id) = ty else {
                panic!("{ty:?} is not a defined type")
            };
            &self.resolve.types[*id].kind
        }

        fn named(&self, name: &str) -> Type {
            let (id, _) = self
                .resolve
                .types
                .iter()
                .find(|(_, t)| t.name.as_deref() == Some(name))
                .unwrap_or_else(|| panic!("no type {name} in the WIT"));
            Type::Id(id)
        }

        fn size(&self, ty: &Type) -> usize {
            self.sizes.size(ty).size_wasm32()
        }

        /// Each field of record `name`: its offset, and its type.
        fn fields(&self, name: &str) -> HashMap<String, (usize, Type)> {
            let TypeDefKind::Record(record) = self.kind(&self.named(name)) else {
                panic!("{name} is not a record")
            };
            let offsets = self
                .sizes
                .field_offsets(record.fields.iter().map(|f| &f.ty));
            record
                .fields
                .iter()
                .zip(offsets)
                .map(|(f, (at, ty))| (f.name.clone(), (at.size_wasm32(), *ty)))
                .collect()
        }

        /// Where an option's or a result's payload starts.
        fn payload(&self, ty: &Type) -> usize {
            let at = match self.kind(ty) {
                TypeDefKind::Option(inner) => {
                    self.sizes.payload_offset(Int::U8, [None, Some(inner)])
                }
                TypeDefKind::Result(r) => self
                    .sizes
                    .payload_offset(Int::U8, [r.ok.as_ref(), r.err.as_ref()]),
                other => panic!("{other:?} has no payload"),
            };
            at.size_wasm32()
        }

        /// The result type of the interface's function `name`.
        fn result_of(&self, name: &str) -> Type {
            let func = self
                .resolve
                .interfaces
                .iter()
                .flat_map(|(_, i)| i.functions.values())
                .find(|f| f.name == name)
                .unwrap_or_else(|| panic!("no function {name} in the WIT"));
            func.result.expect("a result")
        }
    }

    #[test]
    fn layout_matches_the_wit() {
        let wit = Wit::load();
        let at = |fields: &HashMap<String, (usize, Type)>, name: &str| {
            fields
                .get(name)
                .unwrap_or_else(|| panic!("no field {name}"))
                .0
        };
        // Strings and lists are (pointer, length) pairs of u32.
        assert_eq!(wit.size(&Type::String), 8);
        assert_eq!(LEN, 4);

        assert_eq!(RESULT_ERR as usize, wit.payload(&wit.result_of("init")));
        assert_eq!(RESULT_ERR as usize, wit.payload(&wit.result_of("set")));
        assert_eq!(
            OPTION_S64_VALUE as usize,
            wit.payload(&wit.result_of("get"))
        );

        let info = wit.fields("policy-info");
        assert_eq!(at(&info, "name"), 0);
        assert_eq!(at(&info, "version"), INFO_VERSION as usize);
        assert_eq!(at(&info, "merge-veto"), INFO_MERGE_VETO as usize);
        assert_eq!(at(&info, "completions"), INFO_COMPLETIONS as usize);
        assert_eq!(at(&info, "weighted-tags"), INFO_WEIGHTED_TAGS as usize);

        let tunable = wit.fields("tunable");
        assert_eq!(wit.size(&wit.named("tunable")), TUNABLE_SIZE as usize);
        assert_eq!(at(&tunable, "name"), 0);
        assert_eq!(at(&tunable, "default"), TUNABLE_DEFAULT as usize);
        assert_eq!(at(&tunable, "min"), TUNABLE_MIN as usize);
        assert_eq!(at(&tunable, "max"), TUNABLE_MAX as usize);
        assert_eq!(at(&tunable, "unit"), TUNABLE_UNIT as usize);
        assert_eq!(at(&tunable, "help"), TUNABLE_HELP as usize);

        let answer = wit.fields("dispatch-answer");
        assert_eq!(at(&answer, "ids"), 0);
        let (wake, wake_ty) = answer["wake-at-ns"];
        assert_eq!(wake, ANSWER_WAKE as usize);
        assert_eq!(wake + wit.payload(&wake_ty), ANSWER_WAKE_VALUE as usize);

        // init's settings: list<tuple<string, s64>>.
        let TypeDefKind::List(setting) = wit.kind(&init_settings(&wit)) else {
            panic!("settings is not a list")
        };
        let TypeDefKind::Tuple(tuple) = wit.kind(setting) else {
            panic!("a setting is not a tuple")
        };
        let offsets = wit.sizes.field_offsets(tuple.types.iter());
        assert_eq!(wit.size(setting), SETTING_SIZE);
        assert_eq!(offsets[0].0.size_wasm32(), 0);
        assert_eq!(offsets[1].0.size_wasm32(), SETTING_VALUE);

        let event = wit.fields("merge-event");
        assert_eq!(wit.size(&wit.named("merge-event")), EVENT_SIZE);
        assert_eq!(at(&event, "target"), 0);
        assert_eq!(at(&event, "sector"), EVENT_SECTOR);
        assert_eq!(at(&event, "sectors"), EVENT_SECTORS);
        assert_eq!(at(&event, "kind"), EVENT_KIND);
        let (absorbed, absorbed_ty) = event["absorbed"];
        assert_eq!(absorbed, EVENT_ABSORBED);
        assert_eq!(absorbed + wit.payload(&absorbed_ty), EVENT_ABSORBED_VALUE);
    }

    /// The type of `init`'s `settings` parameter.
    fn init_settings(wit: &Wit) -> Type {
        let init = wit
            .resolve
            .interfaces
            .iter()
            .flat_map(|(_, i)| i.functions.values())
            .find(|f| f.name == "init")
            .expect("init");
        init.params
            .iter()
            .find(|p| p.name == "settings")
            .map(|p| p.ty)
            .expect("init takes settings")
    }

    #[test]
    fn exports_match_the_wit() {
        let wit = Wit::load();
        let flat = |t: &WasmType| match t {
            WasmType::I64 => Flat::I64,
            WasmType::I32 | WasmType::Pointer | WasmType::Length => Flat::I32,
            other => panic!("{other:?} has no place in this interface"),
        };
        let exports = crate::policy::core_abi::exports();
        let functions: Vec<_> = wit
            .resolve
            .interfaces
            .iter()
            .flat_map(|(_, i)| i.functions.values())
            .collect();
        for func in &functions {
            let signature = wit.resolve.wasm_signature(AbiVariant::GuestExport, func);
            let params: Vec<Flat> = signature.params.iter().map(flat).collect();
            let results: Vec<Flat> = signature.results.iter().map(flat).collect();
            let listed = exports
                .iter()
                .find(|(name, _, _)| *name == func.name)
                .unwrap_or_else(|| {
                    panic!("{} is in the WIT but the host does not call it", func.name)
                });
            assert_eq!(
                (listed.1.as_slice(), listed.2.as_slice()),
                (params.as_slice(), results.as_slice()),
                "{}",
                func.name
            );
        }
        assert_eq!(
            exports.len(),
            functions.len(),
            "the host calls an export the WIT lacks"
        );
    }
}
