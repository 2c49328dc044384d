//! A photo's size tiers: JPEGs no larger than each tier's longest side (never upscaled), and
//! a tiny inline preview. Decoding takes JPEG, PNG and WebP; everything made is JPEG.

use image::{DynamicImage, ImageFormat, ImageReader, codecs::jpeg::JpegEncoder, imageops};

/// The tiers: type and longest side, smallest first.
pub const TIERS: [(&str, u32); 4] = [("s", 100), ("m", 320), ("x", 800), ("y", 1280)];
/// A document's client thumbnail: type and longest side.
pub const THUMB: (&str, u32) = ("t", 320);
/// Longest side of the inline preview.
const STRIPPED_SIDE: u32 = 40;
/// The largest photo (in bytes) sizes are made of: a bigger one is refused as a photo.
pub const MAX_PHOTO_BYTES: i64 = 10 * 1024 * 1024;
/// The most pixels a photo may have (width × height): decoding allocates that many.
const MAX_PIXELS: u64 = 40_000_000;

/// One size made of a photo.
pub struct Made {
    pub kind: &'static str,
    pub w: u32,
    pub h: u32,
    pub jpeg: Vec<u8>,
}

/// A decoded photo.
pub struct Photo {
    image: DynamicImage,
}

/// Why bytes are not a photo.
#[derive(Debug)]
pub struct NotAPhoto(pub String);

impl Photo {
    /// Decodes a JPEG, PNG or WebP (the format read from the bytes, not a name).
    pub fn decode(bytes: &[u8]) -> Result<Self, NotAPhoto> {
        let reader = ImageReader::new(std::io::Cursor::new(bytes))
            .with_guessed_format()
            .map_err(|e| NotAPhoto(e.to_string()))?;
        match reader.format() {
            Some(ImageFormat::Jpeg | ImageFormat::Png | ImageFormat::WebP) => {}
            _ => return Err(NotAPhoto("not a JPEG, PNG or WebP image".into())),
        }
        let (w, h) = reader
            .into_dimensions()
            .map_err(|e| NotAPhoto(e.to_string()))?;
        if u64::from(w) * u64::from(h) > MAX_PIXELS || w == 0 || h == 0 {
            return Err(NotAPhoto(format!("a {w}×{h} image is too large")));
        }
        let image = ImageReader::new(std::io::Cursor::new(bytes))
            .with_guessed_format()
            .map_err(|e| NotAPhoto(e.to_string()))?
            .decode()
            .map_err(|e| NotAPhoto(e.to_string()))?;
        Ok(Self { image })
    }

    pub fn width(&self) -> u32 {
        self.image.width()
    }

    pub fn height(&self) -> u32 {
        self.image.height()
    }

    /// The tiers whose side the photo reaches (the smallest always), each a JPEG.
    pub fn tiers(&self) -> Result<Vec<Made>, NotAPhoto> {
        let longest = self.width().max(self.height());
        let mut made = Vec::new();
        for (i, (kind, side)) in TIERS.iter().enumerate() {
            // A tier above the photo's own size would only upscale it; the first tier is kept
            // so every photo has one.
            if i > 0 && longest < *side {
                break;
            }
            made.push(self.sized(kind, *side, 85)?);
        }
        Ok(made)
    }

    /// One JPEG of at most `side` pixels on its longest side.
    pub fn sized(&self, kind: &'static str, side: u32, quality: u8) -> Result<Made, NotAPhoto> {
        let image = match self.width().max(self.height()) > side {
            true => self
                .image
                .resize(side, side, imageops::FilterType::Triangle),
            false => self.image.clone(),
        };
        let rgb = image.to_rgb8();
        let mut jpeg = Vec::new();
        JpegEncoder::new_with_quality(&mut jpeg, quality)
            .encode_image(&rgb)
            .map_err(|e| NotAPhoto(e.to_string()))?;
        Ok(Made {
            kind,
            w: rgb.width(),
            h: rgb.height(),
            jpeg,
        })
    }

    /// The inline preview: a very small, low-quality JPEG.
    pub fn stripped(&self) -> Result<Vec<u8>, NotAPhoto> {
        Ok(self.sized("i", STRIPPED_SIDE, 30)?.jpeg)
    }
}
