//! One-line summaries of Ethernet frames for traces and reports
//! ("TCP 10.0.0.1:40312 > 10.0.0.2:2379 [S] len=0").

fn ip(b: &[u8]) -> String {
    format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

pub fn summarize(f: &[u8]) -> String {
    if f.len() < 14 {
        return format!("runt frame ({} bytes)", f.len());
    }
    match be16(&f[12..14]) {
        0x0806 if f.len() >= 42 => {
            let a = &f[14..];
            match be16(&a[6..8]) {
                1 => format!("ARP who-has {} tell {}", ip(&a[24..28]), ip(&a[14..18])),
                2 => format!("ARP {} is-at {:02x}:{:02x}", ip(&a[14..18]), a[12], a[13]),
                op => format!("ARP op {op}"),
            }
        }
        0x0800 if f.len() >= 34 => ipv4(&f[14..]),
        0x86dd => "IPv6".into(),
        t => format!("ethertype {t:#06x} ({} bytes)", f.len()),
    }
}

fn ipv4(p: &[u8]) -> String {
    let ihl = usize::from(p[0] & 0x0f) * 4;
    let total = usize::from(be16(&p[2..4])).min(p.len());
    if ihl < 20 || p.len() < ihl {
        return "IPv4 (bad header)".into();
    }
    let (src, dst) = (ip(&p[12..16]), ip(&p[16..20]));
    let l4 = &p[ihl..total.max(ihl)];
    match p[9] {
        6 if l4.len() >= 20 => {
            let off = usize::from(l4[12] >> 4) * 4;
            let flags = l4[13];
            let names: String = [(0x02, 'S'), (0x10, '.'), (0x01, 'F'), (0x04, 'R'), (0x08, 'P')]
                .iter()
                .filter(|(bit, _)| flags & bit != 0)
                .map(|(_, c)| *c)
                .collect();
            format!(
                "TCP {src}:{} > {dst}:{} [{names}] seq={} len={}",
                be16(&l4[0..2]),
                be16(&l4[2..4]),
                u32::from_be_bytes([l4[4], l4[5], l4[6], l4[7]]),
                l4.len().saturating_sub(off)
            )
        }
        17 if l4.len() >= 8 => {
            format!("UDP {src}:{} > {dst}:{} len={}", be16(&l4[0..2]), be16(&l4[2..4]), l4.len() - 8)
        }
        1 if !l4.is_empty() => match l4[0] {
            8 => format!("ICMP echo request {src} > {dst}"),
            0 => format!("ICMP echo reply {src} > {dst}"),
            t => format!("ICMP type {t} {src} > {dst}"),
        },
        proto => format!("IPv4 proto {proto} {src} > {dst}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summarizes_common_frames() {
        let syn = netsim::frame::tcp_ipv4(
            netsim::NodeId::new(1).unwrap(),
            netsim::NodeId::new(2).unwrap(),
            40000,
            2379,
            7,
            0,
            netsim::frame::tcp_flags::SYN,
            &[],
        );
        assert_eq!(summarize(&syn), "TCP 10.0.0.1:40000 > 10.0.0.2:2379 [S] seq=7 len=0");
        let arp = netsim::frame::arp_request(netsim::NodeId::new(1).unwrap(), netsim::NodeId::new(3).unwrap());
        assert_eq!(summarize(&arp), "ARP who-has 10.0.0.3 tell 10.0.0.1");
        assert_eq!(summarize(&[0u8; 5]), "runt frame (5 bytes)");
    }
}
