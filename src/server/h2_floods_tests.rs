use super::*;

fn frame(kind: u8, flags: u8, length: usize) -> Vec<u8> {
    let mut f = (length as u32).to_be_bytes()[1..].to_vec();
    f.extend([kind, flags, 0, 0, 0, 1]);
    f.extend(std::iter::repeat_n(b'x', length));
    f
}

fn connection() -> (Frames, Vec<u8>) {
    (Frames::new(true), PREFACE.to_vec())
}

/// Feeds `bytes` in pieces of `step`, as reads may split them anywhere.
fn feed_split(frames: &mut Frames, bytes: &[u8], step: usize) -> Result<(), Flood> {
    bytes.chunks(step).try_for_each(|c| frames.feed(c))
}

#[test]
fn ordinary_traffic_passes_however_it_is_split() {
    for step in [1, 5, 9, 100, 100_000] {
        let (mut frames, mut bytes) = connection();
        bytes.extend(frame(SETTINGS, 0, 12));
        bytes.extend(frame(HEADERS, END_HEADERS, 30));
        bytes.extend(frame(DATA, 0, 16_384));
        bytes.extend(frame(DATA, END_STREAM, 0));
        bytes.extend(frame(SETTINGS, ACK, 0));
        assert_eq!(feed_split(&mut frames, &bytes, step), Ok(()), "step {step}");
        assert!(
            matches!(frames.position, Position::Header(0)),
            "step {step}"
        );
    }
}

#[test]
fn http1_is_not_looked_at() {
    let mut frames = Frames::new(true);
    assert_eq!(frames.feed(b"GET / HTTP/1.1\r\n"), Ok(()));
    assert!(matches!(frames.position, Position::Off));
    let mut frames = Frames::new(false);
    assert_eq!(frames.feed(PREFACE), Ok(()));
    assert!(matches!(frames.position, Position::Off));
}

#[test]
fn empty_frames_in_a_row_are_a_flood() {
    let (mut frames, mut bytes) = connection();
    for _ in 0..MAX_EMPTY_RUN {
        bytes.extend(frame(DATA, 0, 0));
    }
    assert_eq!(frames.feed(&bytes), Ok(()));
    // A frame with a payload ends the run; past the limit without one, it is a flood.
    assert_eq!(frames.feed(&frame(DATA, 0, 10)), Ok(()));
    let run: Vec<u8> = (0..=MAX_EMPTY_RUN)
        .flat_map(|_| frame(CONTINUATION, 0, 0))
        .collect();
    assert_eq!(frames.feed(&run), Err(Flood::Empty));
}

#[test]
fn a_ping_flood_is_cut_off_but_acks_are_free() {
    let (mut frames, mut bytes) = connection();
    for _ in 0..10_000 {
        bytes.extend(frame(PING, ACK, 8));
    }
    assert_eq!(frames.feed(&bytes), Ok(()));
    let flood: Vec<u8> = (0..2_000).flat_map(|_| frame(PING, 0, 8)).collect();
    assert_eq!(frames.feed(&flood), Err(Flood::Control));
}

#[test]
fn small_data_is_bounded_and_full_frames_are_not() {
    let (mut frames, _) = connection();
    frames.feed(PREFACE).unwrap();
    let big: Vec<u8> = (0..20_000).flat_map(|_| frame(DATA, 0, 1_000)).collect();
    assert_eq!(frames.feed(&big), Ok(()));
    let dribble: Vec<u8> = (0..20_000).flat_map(|_| frame(DATA, 0, 1)).collect();
    assert_eq!(frames.feed(&dribble), Err(Flood::SmallData));
}
