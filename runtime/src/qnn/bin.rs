//! `model.bin`: the static tensors' bytes, as the QNN converter stores them: a tar archive
//! of one `<tensor name>.raw` file per static tensor, little-endian, row-major.

use std::collections::BTreeMap;
use std::io::{Read, Write};

/// The file name inside `npu/`.
pub const BIN_FILE: &str = "model.bin";

/// Writes `tensors` (name -> bytes) as a tar archive to `out`.
pub fn write_bin<W: Write>(out: W, tensors: &BTreeMap<String, Vec<u8>>) -> std::io::Result<()> {
    let mut archive = tar::Builder::new(out);
    for (name, bytes) in tensors {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_cksum();
        archive.append_data(&mut header, format!("{name}.raw"), bytes.as_slice())?;
    }
    archive.into_inner()?.flush()
}

/// Reads every `<name>.raw` entry of the archive in `input` (name -> bytes). An entry of
/// another name, or one announcing more than `max_bytes` in all, is an error.
pub fn read_bin<R: Read>(input: R, max_bytes: u64) -> std::io::Result<BTreeMap<String, Vec<u8>>> {
    let invalid = |message: String| std::io::Error::new(std::io::ErrorKind::InvalidData, message);
    let mut archive = tar::Archive::new(input);
    let mut tensors = BTreeMap::new();
    let mut total = 0u64;
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.to_string_lossy().into_owned();
        let name = path
            .strip_suffix(".raw")
            .ok_or_else(|| invalid(format!("entry `{path}` is not a `<tensor>.raw` file")))?
            .to_string();
        let size = entry.header().size()?;
        total = total.saturating_add(size);
        if total > max_bytes {
            return Err(invalid(format!(
                "entries hold more than {max_bytes} bytes (at `{path}`)"
            )));
        }
        let mut bytes = Vec::with_capacity(size as usize);
        entry.read_to_end(&mut bytes)?;
        if tensors.insert(name, bytes).is_some() {
            return Err(invalid(format!("entry `{path}` appears twice")));
        }
    }
    Ok(tensors)
}
