//! The doubly linked lists every reference policy is built from, over one slab of nodes so that no list allocates
//! per entry. A list's head holds the newest node and its tail the oldest, and `prev` points towards the head, as in
//! libCacheSim, whose hands (SIEVE's, S3-FIFO's CLOCK) walk from the tail through `prev`.

pub const NIL: u32 = u32::MAX;

#[derive(Debug, Clone)]
pub struct Node {
    pub key: u64,
    pub size: u64,
    /// Policy-specific: a frequency, a visited bit, or a count.
    pub freq: i64,
    /// Policy-specific: which list holds the node.
    pub tag: u8,
    prev: u32,
    next: u32,
}

#[derive(Debug, Default)]
pub struct Slab {
    nodes: Vec<Node>,
    free: Vec<u32>,
}

impl Slab {
    pub fn alloc(&mut self, key: u64, size: u64, tag: u8) -> u32 {
        let node = Node { key, size, freq: 0, tag, prev: NIL, next: NIL };
        match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    pub fn release(&mut self, i: u32) {
        self.free.push(i);
    }

    pub fn get(&self, i: u32) -> &Node {
        &self.nodes[i as usize]
    }

    pub fn get_mut(&mut self, i: u32) -> &mut Node {
        &mut self.nodes[i as usize]
    }

    /// The next newer node of the same list, or `NIL` at the head.
    pub fn prev(&self, i: u32) -> u32 {
        self.nodes[i as usize].prev
    }
}

/// One list: its ends and the sum of its nodes' sizes.
#[derive(Debug)]
pub struct List {
    pub head: u32,
    pub tail: u32,
    pub bytes: u64,
    pub len: usize,
}

impl Default for List {
    fn default() -> Self {
        List { head: NIL, tail: NIL, bytes: 0, len: 0 }
    }
}

impl List {
    pub fn push_head(&mut self, slab: &mut Slab, i: u32) {
        let head = self.head;
        {
            let node = slab.get_mut(i);
            node.prev = NIL;
            node.next = head;
        }
        if head != NIL {
            slab.get_mut(head).prev = i;
        } else {
            self.tail = i;
        }
        self.head = i;
        self.bytes += slab.get(i).size;
        self.len += 1;
    }

    pub fn unlink(&mut self, slab: &mut Slab, i: u32) {
        let (prev, next, size) = {
            let node = slab.get(i);
            (node.prev, node.next, node.size)
        };
        if prev == NIL {
            self.head = next;
        } else {
            slab.get_mut(prev).next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            slab.get_mut(next).prev = prev;
        }
        self.bytes -= size;
        self.len -= 1;
    }

    pub fn move_to_head(&mut self, slab: &mut Slab, i: u32) {
        self.unlink(slab, i);
        self.push_head(slab, i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_keep_order_and_bytes() {
        let mut slab = Slab::default();
        let mut list = List::default();
        let a = slab.alloc(1, 10, 0);
        let b = slab.alloc(2, 20, 0);
        let c = slab.alloc(3, 30, 0);
        for i in [a, b, c] {
            list.push_head(&mut slab, i);
        }
        assert_eq!((list.head, list.tail, list.bytes, list.len), (c, a, 60, 3));
        assert_eq!(slab.prev(a), b);
        list.move_to_head(&mut slab, a);
        assert_eq!((list.head, list.tail), (a, b));
        list.unlink(&mut slab, c);
        assert_eq!((list.bytes, list.len, slab.prev(b)), (30, 2, a));
    }
}
