//! [`CachePadded`]: a value alone on its cache lines.

/// Pads and aligns a value to 128 bytes (two 64-byte lines: adjacent-line prefetchers on x86
/// pull pairs of lines), so the hot atomics of different owners never share a cache line.
#[derive(Debug, Default)]
#[cfg_attr(any(target_arch = "x86_64", target_arch = "aarch64"), repr(align(128)))]
#[cfg_attr(not(any(target_arch = "x86_64", target_arch = "aarch64")), repr(align(64)))]
pub(crate) struct CachePadded<T>(pub(crate) T);

impl<T> core::ops::Deref for CachePadded<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}
