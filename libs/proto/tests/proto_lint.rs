//! The rules every file under `proto/` keeps, checked on the descriptors the build compiled
//! (the set the servers' reflection serves):
//! - a file `oxigram/<pkg>/v<N>/<name>.proto` declares `package oxigram.<pkg>.v<N>`, at most
//!   one service, and is compiled (nothing under `proto/` lies elsewhere);
//! - an internal service's API imports nothing of another service: only its own package and
//!   the shared shapes (`oxigram.types`); the client API (`oxigram.api`) imports only itself
//!   and `types`, and `types` only itself;
//! - a field number is never reused: `proto/fields.lock` lists every field every message has
//!   ever had (`<message> <number> <name> <type>`), removed ones marked `removed`. A field
//!   whose number the lock gives another name or type fails, and so does a removed field
//!   whose number its message does not `reserved`.
//!
//! A new or removed field changes the lock: write it with
//! `UPDATE_PROTO_LOCK=1 cargo nextest run -p oxigram-proto --test proto_lint` and commit it
//! with the change. The update never accepts a reused number. A breaking change that is meant
//! (an internal message renamed, say) is made by deleting its lines from the lock by hand,
//! in the same commit, where the review sees it.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
    path::{Path, PathBuf},
};

use prost::Message as _;
use prost_types::{
    DescriptorProto, EnumDescriptorProto, FieldDescriptorProto, FileDescriptorProto,
    FileDescriptorSet,
    field_descriptor_proto::{Label, Type},
};

/// The package of the shapes every API shares.
const SHARED: &str = "types";
/// The package of the client API.
const CLIENT_API: &str = "api";
/// Set to rewrite the lock from the current build.
const UPDATE: &str = "UPDATE_PROTO_LOCK";

fn proto_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto")
}

fn lock_path() -> PathBuf {
    proto_root().join("fields.lock")
}

fn compiled() -> Vec<FileDescriptorProto> {
    match FileDescriptorSet::decode(oxigram_proto::FILE_DESCRIPTOR_SET) {
        Ok(set) => set.file,
        Err(err) => panic!("the compiled descriptor set does not decode: {err}"),
    }
}

/// `oxigram/<pkg>/v<N>/<name>.proto` as (`<pkg>`, `v<N>`).
fn place(file: &str) -> Option<(&str, &str)> {
    let parts: Vec<&str> = file.split('/').collect();
    match parts.as_slice() {
        ["oxigram", pkg, version, name]
            if version.len() > 1
                && version.starts_with('v')
                && version[1..].bytes().all(|b| b.is_ascii_digit())
                && name.ends_with(".proto") =>
        {
            Some((pkg, version))
        }
        _ => None,
    }
}

/// The package part of an `oxigram.<pkg>.v<N>` package name.
fn short_package(package: &str) -> Option<&str> {
    let mut parts = package.split('.');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some("oxigram"), Some(pkg), Some(_), None) => Some(pkg),
        _ => None,
    }
}

/// Breaks of the naming and import rules by the compiled files.
fn layout_problems(files: &[FileDescriptorProto]) -> Vec<String> {
    let mut problems = Vec::new();
    let package_of: BTreeMap<&str, &str> = files.iter().map(|f| (f.name(), f.package())).collect();
    for file in files.iter().filter(|f| !f.name().starts_with("google/")) {
        let name = file.name();
        let Some((pkg, version)) = place(name) else {
            problems.push(format!(
                "{name}: a file lies at oxigram/<package>/v<N>/<name>.proto"
            ));
            continue;
        };
        let expected = format!("oxigram.{pkg}.{version}");
        if file.package() != expected {
            problems.push(format!(
                "{name}: declares package {}, its folder says {expected}",
                file.package()
            ));
        }
        if file.service.len() > 1 {
            problems.push(format!("{name}: one service per file"));
        }
        for dependency in &file.dependency {
            if dependency.starts_with("google/protobuf/") {
                continue;
            }
            let imported = package_of
                .get(dependency.as_str())
                .and_then(|p| short_package(p))
                .unwrap_or("?");
            if imported != pkg && imported != SHARED {
                problems.push(format!(
                    "{name}: imports {dependency} (package {imported}); a package imports only \
                     itself and the shared shapes in oxigram.{SHARED}"
                ));
            }
        }
    }
    problems
}

/// Every `.proto` under `dir`, relative to `root`.
fn files_on_disk(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) => panic!("cannot read {}: {err}", dir.display()),
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_on_disk(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "proto")
            && let Ok(relative) = path.strip_prefix(root)
        {
            out.push(relative.to_string_lossy().replace('\\', "/"));
        }
    }
}

/// One field number of one message, as the lock records it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Field {
    name: String,
    /// Label, type and oneof, e.g. `repeated .oxigram.types.v1.User` or `int64 oneof kind`.
    kind: String,
    removed: bool,
}

/// (message or enum full name, number) → its field or value.
type Fields = BTreeMap<(String, i32), Field>;

fn kind_of(field: &FieldDescriptorProto, message: &DescriptorProto) -> String {
    let mut kind = String::new();
    if field.label() == Label::Repeated {
        kind.push_str("repeated ");
    } else if field.proto3_optional() {
        kind.push_str("optional ");
    }
    match field.r#type() {
        Type::Message | Type::Enum | Type::Group => kind.push_str(field.type_name()),
        scalar => kind.push_str(&scalar.as_str_name()["TYPE_".len()..].to_lowercase()),
    }
    if let Some(index) = field.oneof_index
        && !field.proto3_optional()
        && let Some(oneof) = usize::try_from(index)
            .ok()
            .and_then(|i| message.oneof_decl.get(i))
    {
        let _ = write!(kind, " oneof {}", oneof.name());
    }
    kind
}

fn enum_fields(scope: &str, e: &EnumDescriptorProto, out: &mut Fields) {
    let full = format!("{scope}.{}", e.name());
    for value in &e.value {
        let field = Field {
            name: value.name().to_owned(),
            kind: "enum value".to_owned(),
            removed: false,
        };
        out.insert((full.clone(), value.number()), field);
    }
}

fn message_fields(scope: &str, m: &DescriptorProto, out: &mut Fields) {
    let full = format!("{scope}.{}", m.name());
    for field in &m.field {
        let entry = Field {
            name: field.name().to_owned(),
            kind: kind_of(field, m),
            removed: false,
        };
        out.insert((full.clone(), field.number()), entry);
    }
    for nested in &m.nested_type {
        message_fields(&full, nested, out);
    }
    for e in &m.enum_type {
        enum_fields(&full, e, out);
    }
}

/// Every field and enum value of our files, and the numbers each message reserves.
fn current(files: &[FileDescriptorProto]) -> (Fields, BTreeMap<String, Vec<(i32, i32)>>) {
    let mut fields = Fields::new();
    let mut reserved = BTreeMap::new();
    fn reserve(scope: &str, m: &DescriptorProto, out: &mut BTreeMap<String, Vec<(i32, i32)>>) {
        let full = format!("{scope}.{}", m.name());
        for nested in &m.nested_type {
            reserve(&full, nested, out);
        }
        let ranges = m.reserved_range.iter().map(|r| (r.start(), r.end()));
        out.insert(full, ranges.collect());
    }
    for file in files.iter().filter(|f| !f.name().starts_with("google/")) {
        for m in &file.message_type {
            message_fields(file.package(), m, &mut fields);
            reserve(file.package(), m, &mut reserved);
        }
        for e in &file.enum_type {
            enum_fields(file.package(), e, &mut fields);
        }
    }
    (fields, reserved)
}

/// The lock's lines: `[removed ]<message> <number> <name> <kind…>`, `#` comments.
fn parse_lock(text: &str) -> Result<Fields, String> {
    let mut fields = Fields::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (removed, line) = match line.strip_prefix("removed ") {
            Some(rest) => (true, rest),
            None => (false, line),
        };
        let mut parts = line.splitn(4, ' ');
        let (Some(message), Some(number), Some(name), Some(kind)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(format!("fields.lock line {}: `{line}`", i + 1));
        };
        let number: i32 = number
            .parse()
            .map_err(|_| format!("fields.lock line {}: bad number {number}", i + 1))?;
        let field = Field {
            name: name.to_owned(),
            kind: kind.to_owned(),
            removed,
        };
        if fields.insert((message.to_owned(), number), field).is_some() {
            return Err(format!(
                "fields.lock line {}: {message} {number} twice",
                i + 1
            ));
        }
    }
    Ok(fields)
}

const LOCK_HEADER: &str = "\
# Every field number every message of proto/ has ever used, and enum values likewise:
# `<message> <number> <name> <type>`, a removed one marked `removed` (its number is never used
# again). Checked by libs/proto/tests/proto_lint.rs; after adding or removing a field, rewrite
# it with `UPDATE_PROTO_LOCK=1 cargo nextest run -p oxigram-proto --test proto_lint`.
";

fn render_lock(fields: &Fields) -> String {
    let mut out = String::from(LOCK_HEADER);
    for ((message, number), f) in fields {
        let removed = if f.removed { "removed " } else { "" };
        let _ = writeln!(out, "{removed}{message} {number} {} {}", f.name, f.kind);
    }
    out
}

/// What the build breaks against the lock, and the lock as it should read now.
fn check_against(
    now: &Fields,
    reserved: &BTreeMap<String, Vec<(i32, i32)>>,
    lock: &Fields,
) -> (Vec<String>, Fields) {
    let mut problems = Vec::new();
    let mut next = lock.clone();
    for (key, field) in now {
        match lock.get(key) {
            Some(was) if was.name != field.name || was.kind != field.kind => {
                let what = if was.removed {
                    "a removed number"
                } else {
                    "a number"
                };
                problems.push(format!(
                    "{} = {}: {what} reused, was `{} {}`, now `{} {}`",
                    key.0, key.1, was.name, was.kind, field.name, field.kind
                ));
            }
            _ => {
                next.insert(key.clone(), field.clone());
            }
        }
    }
    for (key, was) in lock {
        if now.contains_key(key) || was.removed {
            if was.removed && !now.contains_key(key) {
                check_reserved(key, reserved, &mut problems);
            }
            continue;
        }
        check_reserved(key, reserved, &mut problems);
        let mut removed = was.clone();
        removed.removed = true;
        next.insert(key.clone(), removed);
    }
    (problems, next)
}

/// A message that still exists reserves the numbers of the fields it lost.
fn check_reserved(
    (message, number): &(String, i32),
    reserved: &BTreeMap<String, Vec<(i32, i32)>>,
    problems: &mut Vec<String>,
) {
    if let Some(ranges) = reserved.get(message)
        && !ranges
            .iter()
            .any(|(start, end)| (*start..*end).contains(number))
    {
        problems.push(format!(
            "{message} = {number}: the field was removed; add `reserved {number};` to {message}"
        ));
    }
}

#[test]
fn every_file_declares_the_package_of_its_folder_and_imports_no_other_service() {
    let files = compiled();
    let problems = layout_problems(&files);
    assert!(
        problems.is_empty(),
        "proto layout:\n{}",
        problems.join("\n")
    );

    let root = proto_root();
    let mut on_disk = Vec::new();
    files_on_disk(&root, &root, &mut on_disk);
    let compiled: BTreeSet<&str> = files.iter().map(|f| f.name()).collect();
    let stray: Vec<&String> = on_disk
        .iter()
        .filter(|f| !compiled.contains(f.as_str()))
        .collect();
    assert!(
        stray.is_empty(),
        "not compiled (every file lies at proto/oxigram/<package>/v<N>/): {stray:?}"
    );
    // The client API's servers pick their codec by this package (see build.rs).
    assert!(files.iter().any(|f| f.package() == "oxigram.api.v1"));
    assert!(
        on_disk
            .iter()
            .any(|f| place(f).map(|p| p.0) == Some(CLIENT_API))
    );
}

#[test]
fn no_field_number_is_ever_reused() {
    let (now, reserved) = current(&compiled());
    let lock_text = std::fs::read_to_string(lock_path()).unwrap_or_default();
    let lock = match parse_lock(&lock_text) {
        Ok(lock) => lock,
        Err(err) => panic!("{err}"),
    };
    let (problems, next) = check_against(&now, &reserved, &lock);
    assert!(
        problems.is_empty(),
        "field numbers reused or not reserved (proto/fields.lock):\n{}",
        problems.join("\n")
    );
    let rendered = render_lock(&next);
    if std::env::var_os(UPDATE).is_some() {
        if let Err(err) = std::fs::write(lock_path(), &rendered) {
            panic!("cannot write {}: {err}", lock_path().display());
        }
        return;
    }
    assert!(
        rendered == lock_text,
        "proto/fields.lock is not up to date with the protos: rewrite it with \
         `{UPDATE}=1 cargo nextest run -p oxigram-proto --test proto_lint`"
    );
}

/// The rules' own cases: each break is seen.
mod rules {
    use prost_types::{FieldDescriptorProto, field_descriptor_proto::Type};

    use super::*;

    fn field(name: &str, kind: &str) -> Field {
        Field {
            name: name.into(),
            kind: kind.into(),
            removed: false,
        }
    }

    fn key(number: i32) -> (String, i32) {
        ("oxigram.x.v1.M".to_owned(), number)
    }

    fn file(name: &str, package: &str, imports: &[&str]) -> FileDescriptorProto {
        FileDescriptorProto {
            name: Some(name.into()),
            package: Some(package.into()),
            dependency: imports.iter().map(|i| (*i).to_owned()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn field_changes_against_the_lock() {
        let lock: Fields = [
            (key(1), field("a", "int64")),
            (key(2), field("b", "string")),
        ]
        .into_iter()
        .collect();
        let reserving = |ranges: Vec<(i32, i32)>| {
            [("oxigram.x.v1.M".to_owned(), ranges)]
                .into_iter()
                .collect::<BTreeMap<_, _>>()
        };
        // (case, fields now, reserved ranges, problems expected)
        type Case = (
            &'static str,
            Vec<((String, i32), Field)>,
            Vec<(i32, i32)>,
            usize,
        );
        let cases: Vec<Case> = vec![
            (
                "unchanged",
                vec![
                    (key(1), field("a", "int64")),
                    (key(2), field("b", "string")),
                ],
                vec![],
                0,
            ),
            (
                "added",
                vec![
                    (key(1), field("a", "int64")),
                    (key(2), field("b", "string")),
                    (key(3), field("c", "bool")),
                ],
                vec![],
                0,
            ),
            (
                "retyped",
                vec![
                    (key(1), field("a", "int32")),
                    (key(2), field("b", "string")),
                ],
                vec![],
                1,
            ),
            (
                "renamed",
                vec![
                    (key(1), field("z", "int64")),
                    (key(2), field("b", "string")),
                ],
                vec![],
                1,
            ),
            (
                "removed and reserved",
                vec![(key(1), field("a", "int64"))],
                vec![(2, 3)],
                0,
            ),
            (
                "removed, not reserved",
                vec![(key(1), field("a", "int64"))],
                vec![],
                1,
            ),
        ];
        for (case, now, ranges, expected) in cases {
            let now: Fields = now.into_iter().collect();
            let (problems, _) = check_against(&now, &reserving(ranges), &lock);
            assert_eq!(problems.len(), expected, "{case}: {problems:?}");
        }
    }

    #[test]
    fn a_removed_number_stays_taken() {
        let lock: Fields = [
            (key(1), field("a", "int64")),
            (key(2), field("b", "string")),
        ]
        .into_iter()
        .collect();
        let now: Fields = [(key(1), field("a", "int64"))].into_iter().collect();
        let reserved = [("oxigram.x.v1.M".to_owned(), vec![(2, 3)])]
            .into_iter()
            .collect();
        let (problems, next) = check_against(&now, &reserved, &lock);
        assert!(problems.is_empty(), "{problems:?}");
        assert!(next[&key(2)].removed);
        // The lock round-trips through its text.
        assert_eq!(parse_lock(&render_lock(&next)), Ok(next.clone()));
        // Reused later, with its reservation dropped, under another name.
        let reused: Fields = [(key(1), field("a", "int64")), (key(2), field("c", "bytes"))]
            .into_iter()
            .collect();
        let (problems, _) = check_against(&reused, &BTreeMap::new(), &next);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("a removed number reused"));
    }

    #[test]
    fn packages_and_imports() {
        let types = "oxigram/types/v1/types.proto";
        let messages = "oxigram/messages/v1/messages.proto";
        // (case, file, problems expected)
        let cases = [
            (
                "in its folder",
                file(messages, "oxigram.messages.v1", &[types]),
                0,
            ),
            (
                "another folder's package",
                file(messages, "oxigram.internal.v1", &[types]),
                1,
            ),
            (
                "out of place",
                file("oxigram/internal/messages.proto", "oxigram.internal", &[]),
                1,
            ),
            (
                "imports another service",
                file(
                    "oxigram/dialogs/v1/dialogs.proto",
                    "oxigram.dialogs.v1",
                    &[messages],
                ),
                1,
            ),
            (
                "the client API imports a service",
                file("oxigram/api/v1/auth.proto", "oxigram.api.v1", &[messages]),
                1,
            ),
            (
                "well-known types",
                file(
                    "oxigram/media/v1/media.proto",
                    "oxigram.media.v1",
                    &["google/protobuf/empty.proto"],
                ),
                0,
            ),
        ];
        for (case, f, expected) in cases {
            // Beside files that keep the rules: the shared shapes and another service.
            let mut set = vec![
                file(types, "oxigram.types.v1", &[]),
                file(messages, "oxigram.messages.v1", &[types]),
            ];
            set.retain(|other| other.name() != f.name());
            set.push(f);
            let problems = layout_problems(&set);
            assert_eq!(problems.len(), expected, "{case}: {problems:?}");
        }
    }

    #[test]
    fn a_field_names_its_type_label_and_oneof() {
        let message = DescriptorProto {
            name: Some("M".into()),
            oneof_decl: vec![prost_types::OneofDescriptorProto {
                name: Some("kind".into()),
                ..Default::default()
            }],
            ..Default::default()
        };
        let ids = FieldDescriptorProto {
            label: Some(Label::Repeated as i32),
            r#type: Some(Type::Int64 as i32),
            ..Default::default()
        };
        assert_eq!(kind_of(&ids, &message), "repeated int64");
        let update = FieldDescriptorProto {
            r#type: Some(Type::Message as i32),
            type_name: Some(".oxigram.types.v1.Update".into()),
            oneof_index: Some(0),
            ..Default::default()
        };
        assert_eq!(
            kind_of(&update, &message),
            ".oxigram.types.v1.Update oneof kind"
        );
    }
}
