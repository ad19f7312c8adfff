//! Camera frames and composites: how they are filled, laid out and checked.
//!
//! Every participant fills its frame for slot `ts` with one byte value, `(id * 37 + ts) &
//! 0xff`, then writes its id (u32 little-endian) in bytes 0..4 and the slot (u64
//! little-endian) in bytes 4..12. A display can therefore check any tile of a composite from
//! three places: the id, the slot, and the tile's last byte, which no header covers. The
//! composite puts K tiles on a grid of `ceil(sqrt(K))` columns, members in ascending id order,
//! row by row; cells without a frame are zeros, which reads as id 0, "empty".

use bytes::Bytes;
use stampede_core::{DType, Item, NdArray};

/// Frame width in pixels unless told otherwise.
pub const DEFAULT_WIDTH: usize = 176;

/// Bytes of a frame taken by the header: id (u32) and slot (u64), little-endian.
pub const HEADER_LEN: usize = 12;

/// Height and width of a frame in pixels; every pixel is 3 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FrameSize {
    /// Rows of pixels.
    pub height: usize,
    /// Columns of pixels.
    pub width: usize,
}

impl FrameSize {
    /// The frame of about `size_kb` thousand bytes at `width` pixels:
    /// `height = round(size_kb * 1000 / (width * 3))`, at least one row.
    ///
    /// ```
    /// use stampede_conference::FrameSize;
    /// let heights: Vec<_> = [74, 125, 190]
    ///     .iter()
    ///     .map(|&kb| FrameSize::from_size_kb(kb, 176).height)
    ///     .collect();
    /// assert_eq!(heights, [140, 237, 360]);
    /// ```
    pub fn from_size_kb(size_kb: u32, width: usize) -> FrameSize {
        let row = (width.max(1) * 3) as f64;
        let height = (f64::from(size_kb) * 1000.0 / row).round().max(1.0) as usize;
        FrameSize {
            height,
            width: width.max(1),
        }
    }

    /// Bytes of one frame.
    pub fn bytes(&self) -> usize {
        self.height * self.width * 3
    }

    /// Whether a frame of this size has room for the header in its first row, which the
    /// checks rely on.
    pub fn holds_header(&self) -> bool {
        self.width * 3 >= HEADER_LEN
    }
}

/// The byte value of participant `id`'s frame for slot `ts`.
pub fn fill_byte(id: u32, ts: u64) -> u8 {
    (u64::from(id).wrapping_mul(37).wrapping_add(ts) & 0xff) as u8
}

/// Fills `buf` as participant `id`'s frame for slot `ts`.
pub fn fill_frame(buf: &mut [u8], id: u32, ts: u64) {
    buf.fill(fill_byte(id, ts));
    if buf.len() >= HEADER_LEN {
        buf[0..4].copy_from_slice(&id.to_le_bytes());
        buf[4..12].copy_from_slice(&ts.to_le_bytes());
    }
}

/// Participant `id`'s frame for slot `ts`, as raw bytes.
pub fn frame_bytes(id: u32, ts: u64, size: FrameSize) -> Vec<u8> {
    let mut buf = vec![0u8; size.bytes()];
    fill_frame(&mut buf, id, ts);
    buf
}

/// Participant `id`'s frame for slot `ts`, as the item a camera puts: `NdArray` U8 of shape
/// `[height, width, 3]`.
pub fn frame_item(id: u32, ts: u64, size: FrameSize) -> Item {
    let data = Bytes::from(frame_bytes(id, ts, size));
    NdArray::new(DType::U8, &[size.height, size.width, 3], data)
        .expect("the data has the shape's length")
        .into()
}

/// The id and slot a frame (or a tile's first row) starts with; id 0 is an empty cell.
pub fn read_header(bytes: &[u8]) -> Option<(u32, u64)> {
    let id = u32::from_le_bytes(bytes.get(0..4)?.try_into().ok()?);
    let ts = u64::from_le_bytes(bytes.get(4..12)?.try_into().ok()?);
    Some((id, ts))
}

/// The grid of a composite: cells are filled row by row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    /// Rows of tiles.
    pub rows: usize,
    /// Columns of tiles.
    pub cols: usize,
}

impl Grid {
    /// The grid for `members` tiles: `cols = ceil(sqrt(K))`, `rows = ceil(K / cols)`.
    ///
    /// ```
    /// use stampede_conference::Grid;
    /// let shapes: Vec<_> = (1..=6).map(|k| { let g = Grid::for_members(k); (g.rows, g.cols) }).collect();
    /// assert_eq!(shapes, [(1, 1), (1, 2), (2, 2), (2, 2), (2, 3), (2, 3)]);
    /// ```
    pub fn for_members(members: usize) -> Grid {
        if members == 0 {
            return Grid { rows: 0, cols: 0 };
        }
        let mut cols = (members as f64).sqrt() as usize;
        while cols * cols < members {
            cols += 1;
        }
        Grid {
            rows: members.div_ceil(cols),
            cols,
        }
    }

    /// Row and column of tile `i`.
    pub fn cell(&self, i: usize) -> (usize, usize) {
        (i / self.cols, i % self.cols)
    }

    /// Number of cells.
    pub fn cells(&self) -> usize {
        self.rows * self.cols
    }
}

/// One member's frame for a composite: its pixels, row-major, 3 bytes per pixel.
#[derive(Clone, Copy, Debug)]
pub struct Tile<'a> {
    /// The frame's size.
    pub size: FrameSize,
    /// `size.bytes()` bytes.
    pub data: &'a [u8],
}

/// A composite image: its tile size and grid, and the pixels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Composite {
    /// Size of every cell.
    pub tile: FrameSize,
    /// The grid of cells.
    pub grid: Grid,
    /// `grid.rows * tile.height` rows of `grid.cols * tile.width` pixels.
    pub data: Vec<u8>,
}

impl Composite {
    /// The shape of the composite array, `[rows * H, cols * W, 3]`.
    pub fn shape(&self) -> [usize; 3] {
        [
            self.grid.rows * self.tile.height,
            self.grid.cols * self.tile.width,
            3,
        ]
    }

    /// The composite as the item the mixer puts.
    pub fn into_item(self) -> Item {
        let shape = self.shape();
        NdArray::new(DType::U8, &shape, Bytes::from(self.data))
            .expect("the data has the shape's length")
            .into()
    }
}

/// Places the members' frames (in ascending id order; `None` for a missing one) on the
/// grid. Cells are as large as the largest frame present (`fallback` when none is), so
/// frames of one size, the normal case, are copied verbatim and fill their cells exactly;
/// a smaller frame sits in its cell's top-left corner and the rest of the cell is zeros.
pub fn compose(tiles: &[Option<Tile<'_>>], fallback: FrameSize) -> Composite {
    let present = tiles.iter().flatten();
    let tile = match (
        present.clone().map(|t| t.size.height).max(),
        present.map(|t| t.size.width).max(),
    ) {
        (Some(height), Some(width)) => FrameSize { height, width },
        _ => fallback,
    };
    let grid = Grid::for_members(tiles.len());
    let row_bytes = grid.cols * tile.width * 3;
    let mut data = vec![0u8; grid.rows * tile.height * row_bytes];
    for (i, t) in tiles.iter().enumerate() {
        let Some(t) = t else { continue };
        let (r, c) = grid.cell(i);
        let src_row = t.size.width * 3;
        for y in 0..t.size.height {
            let at = (r * tile.height + y) * row_bytes + c * tile.width * 3;
            data[at..at + src_row].copy_from_slice(&t.data[y * src_row..(y + 1) * src_row]);
        }
    }
    Composite { tile, grid, data }
}

/// What a display found in a composite.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Ids of the non-empty tiles, in grid order.
    pub members: Vec<u32>,
    /// Tiles that failed a check (wrong slot or wrong last byte), or 1 for a composite
    /// whose shape does not divide into tiles of the display's frame size.
    pub bad: u64,
}

/// Checks a composite for slot `ts` whose tiles are `tile`-sized: each cell's header names
/// a member (0: empty) and the slot, and its last byte is that member's fill byte.
pub fn verify_composite(data: &[u8], shape: &[usize], tile: FrameSize, ts: u64) -> Verdict {
    let malformed = Verdict {
        members: Vec::new(),
        bad: 1,
    };
    let [height, width, 3] = *shape else {
        return malformed;
    };
    if !tile.holds_header()
        || height % tile.height != 0
        || width % tile.width != 0
        || data.len() != height * width * 3
    {
        return malformed;
    }
    let grid = Grid {
        rows: height / tile.height,
        cols: width / tile.width,
    };
    let row_bytes = width * 3;
    let mut v = Verdict::default();
    for i in 0..grid.cells() {
        let (r, c) = grid.cell(i);
        let first = r * tile.height * row_bytes + c * tile.width * 3;
        let last = (r * tile.height + tile.height - 1) * row_bytes + (c + 1) * tile.width * 3 - 1;
        let Some((id, slot)) = read_header(&data[first..]) else {
            v.bad += 1;
            continue;
        };
        if id == 0 {
            continue;
        }
        v.members.push(id);
        if slot != ts || data[last] != fill_byte(id, ts) {
            v.bad += 1;
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: FrameSize = FrameSize {
        height: 5,
        width: 7,
    };

    fn frames(ids: &[u32], ts: u64, size: FrameSize) -> Vec<Vec<u8>> {
        ids.iter().map(|&id| frame_bytes(id, ts, size)).collect()
    }

    fn tiles(frames: &[Vec<u8>], size: FrameSize) -> Vec<Option<Tile<'_>>> {
        frames
            .iter()
            .map(|f| Some(Tile { size, data: f }))
            .collect()
    }

    #[test]
    fn frames_carry_id_slot_and_fill() {
        let f = frame_bytes(3, 300, SMALL);
        assert_eq!(f.len(), SMALL.bytes());
        assert_eq!(read_header(&f), Some((3, 300)));
        let fill = fill_byte(3, 300);
        assert_eq!(fill, ((3 * 37 + 300) & 0xff) as u8);
        assert!(f[HEADER_LEN..].iter().all(|&b| b == fill));
    }

    #[test]
    fn frame_items_are_u8_arrays_of_the_frame_shape() {
        let item = frame_item(2, 9, SMALL);
        let a: NdArray = item.decode().unwrap();
        assert_eq!(a.dtype(), DType::U8);
        assert_eq!(a.shape(), &[5, 7, 3]);
        assert_eq!(read_header(a.data()), Some((2, 9)));
    }

    #[test]
    fn grids_follow_the_square_root_rule() {
        for k in 1..=40 {
            let g = Grid::for_members(k);
            assert_eq!(g.cols, (k as f64).sqrt().ceil() as usize, "k={k}");
            assert_eq!(g.rows, k.div_ceil(g.cols), "k={k}");
            assert!(g.cells() >= k);
        }
        assert_eq!(Grid::for_members(5).cell(4), (1, 1));
    }

    #[test]
    fn composites_copy_frames_verbatim_into_their_cells() {
        let ids = [1, 4, 9];
        let fs = frames(&ids, 77, SMALL);
        let c = compose(&tiles(&fs, SMALL), SMALL);
        assert_eq!(c.shape(), [10, 14, 3]);
        let row = 14 * 3;
        for (i, f) in fs.iter().enumerate() {
            let (r, col) = c.grid.cell(i);
            for y in 0..SMALL.height {
                let at = (r * SMALL.height + y) * row + col * SMALL.width * 3;
                assert_eq!(
                    &c.data[at..at + SMALL.width * 3],
                    &f[y * SMALL.width * 3..(y + 1) * SMALL.width * 3]
                );
            }
        }
        // The fourth cell is empty.
        let at = SMALL.height * row + SMALL.width * 3;
        assert!(c.data[at..at + SMALL.width * 3].iter().all(|&b| b == 0));
        let v = verify_composite(&c.data, &c.shape(), SMALL, 77);
        assert_eq!(v.members, ids);
        assert_eq!(v.bad, 0);
    }

    #[test]
    fn missing_frames_are_zero_tiles() {
        let fs = frames(&[1, 2], 5, SMALL);
        let ts = vec![
            Some(Tile {
                size: SMALL,
                data: &fs[0],
            }),
            None,
        ];
        let c = compose(&ts, SMALL);
        let v = verify_composite(&c.data, &c.shape(), SMALL, 5);
        assert_eq!(
            v,
            Verdict {
                members: vec![1],
                bad: 0
            }
        );
        let none = compose(&[None, None, None], SMALL);
        assert_eq!(none.shape(), [10, 14, 3]);
        assert!(none.data.iter().all(|&b| b == 0));
    }

    #[test]
    fn verification_catches_wrong_slots_and_damaged_tiles() {
        let fs = frames(&[1, 2], 5, SMALL);
        let c = compose(&tiles(&fs, SMALL), SMALL);
        assert_eq!(verify_composite(&c.data, &c.shape(), SMALL, 6).bad, 2);
        let mut damaged = c.data.clone();
        let last = SMALL.height * 2 * SMALL.width * 3 - 1;
        damaged[last] ^= 1;
        let v = verify_composite(&damaged, &c.shape(), SMALL, 5);
        assert_eq!(v.bad, 1);
        assert_eq!(v.members, [1, 2]);
        let other = FrameSize {
            height: 4,
            width: 7,
        };
        assert_eq!(verify_composite(&c.data, &c.shape(), other, 5).bad, 1);
        assert_eq!(verify_composite(&c.data, &[5, 14], SMALL, 5).bad, 1);
    }

    #[test]
    fn smaller_frames_sit_in_the_corner_of_larger_cells() {
        let big = FrameSize {
            height: 6,
            width: 8,
        };
        let a = frame_bytes(1, 3, big);
        let b = frame_bytes(2, 3, SMALL);
        let c = compose(
            &[
                Some(Tile {
                    size: big,
                    data: &a,
                }),
                Some(Tile {
                    size: SMALL,
                    data: &b,
                }),
            ],
            SMALL,
        );
        assert_eq!(c.tile, big);
        assert_eq!(c.shape(), [6, 16, 3]);
        let row = 16 * 3;
        assert_eq!(read_header(&c.data[8 * 3..]), Some((2, 3)));
        // Below the small frame its cell is zeros.
        assert!(c.data[5 * row + 8 * 3..6 * row].iter().all(|&x| x == 0));
    }

    #[test]
    fn frame_sizes_match_the_papers_data_sizes() {
        assert_eq!(FrameSize::from_size_kb(8, 176).height, 15);
        assert_eq!(FrameSize::from_size_kb(0, 176).height, 1);
        assert!(FrameSize::from_size_kb(74, 176).holds_header());
        assert!(!FrameSize::from_size_kb(1, 3).holds_header());
    }
}
