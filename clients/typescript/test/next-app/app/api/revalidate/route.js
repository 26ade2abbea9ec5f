// POST /api/revalidate?tag=T: revalidateTag(T) with immediate expiry, in whichever instance receives it.
import { revalidateTag } from "next/cache";

export const dynamic = "force-dynamic";

export async function POST(request) {
  const tag = new URL(request.url).searchParams.get("tag");
  if (!tag) return new Response("tag?", { status: 400 });
  revalidateTag(tag, { expire: 0 });
  return Response.json({ revalidated: tag });
}
