//! Format version 1, still read: its frames are version 2's without the span and sample frames,
//! and its records lack [`Record::span`](crate::Record::span). Postcard encodes by position, so
//! the old layout is spelled out here and converted as it is read. (Version 2 needs no module of
//! its own: version 3 only appends the link frame, so version 2 decodes as version 3.)

use crate::{Activity, Aggregate, Device, End, Frame, Gpu, Header, Interval, Memory, Site, Thread};
use serde::Deserialize;

#[derive(Deserialize)]
pub(crate) enum Frame1 {
    Header(Header),
    Site(Site),
    Thread(Thread),
    Device(Device),
    Record(Record1),
    Aggregate(Aggregate),
    End(End),
}

#[derive(Deserialize)]
pub(crate) struct Record1 {
    site: u32,
    scope_id: u64,
    thread: u32,
    host: Interval,
    error: bool,
    bytes: Option<u64>,
    gpu: Option<Gpu>,
    clock_corrected_ns: u64,
    activities: Vec<Activity>,
    memory: Option<[Memory; 2]>,
}

impl From<Frame1> for Frame {
    fn from(f: Frame1) -> Frame {
        match f {
            Frame1::Header(h) => Frame::Header(h),
            Frame1::Site(s) => Frame::Site(s),
            Frame1::Thread(t) => Frame::Thread(t),
            Frame1::Device(d) => Frame::Device(d),
            Frame1::Aggregate(a) => Frame::Aggregate(a),
            Frame1::End(e) => Frame::End(e),
            Frame1::Record(r) => Frame::Record(crate::Record {
                site: r.site,
                scope_id: r.scope_id,
                thread: r.thread,
                host: r.host,
                error: r.error,
                bytes: r.bytes,
                gpu: r.gpu,
                clock_corrected_ns: r.clock_corrected_ns,
                activities: r.activities,
                memory: r.memory,
                span: None,
                attributed: None,
                spans_at_launch: None,
            }),
        }
    }
}
